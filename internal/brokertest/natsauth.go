package brokertest

import (
	"fmt"
	"testing"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// NATSOperator is a NATS operator (JWT) mode setup made in-test: an operator, a system account
// (JetStream needs one in operator mode) and an account with JetStream, both signed by the
// operator and registered in a memory account resolver, and users of that account.
type NATSOperator struct {
	operator, system nkeys.KeyPair
	// Account is the account with JetStream, the issuer of Creds' users.
	Account  nkeys.KeyPair
	resolver *server.MemAccResolver
}

// NewNATSOperator makes the operator and its accounts, failing tb on any error.
func NewNATSOperator(tb testing.TB) *NATSOperator {
	tb.Helper()
	o := &NATSOperator{resolver: &server.MemAccResolver{}}
	var err error
	if o.operator, err = nkeys.CreateOperator(); err != nil {
		tb.Fatal(err)
	}
	o.system = o.addAccount(tb, "SYS", nil)
	o.Account = o.addAccount(tb, "SHOP", &jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1})
	return o
}

// addAccount makes an account the operator signs, with JetStream when js is not nil, and
// registers it in the resolver.
func (o *NATSOperator) addAccount(tb testing.TB, name string, js *jwt.JetStreamLimits) nkeys.KeyPair {
	tb.Helper()
	kp, err := nkeys.CreateAccount()
	if err != nil {
		tb.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	ac := jwt.NewAccountClaims(pub)
	ac.Name = name
	if js != nil {
		ac.Limits.JetStreamLimits = *js
	}
	accJWT, err := ac.Encode(o.operator)
	if err != nil {
		tb.Fatal(err)
	}
	if err := o.resolver.Store(pub, accJWT); err != nil {
		tb.Fatal(err)
	}
	return kp
}

// Configure sets the server options o to trust the operator and resolve its accounts.
func (o *NATSOperator) Configure(opts *server.Options) {
	opPub, _ := o.operator.PublicKey()
	sysPub, _ := o.system.PublicKey()
	opts.TrustedKeys, opts.AccountResolver, opts.SystemAccount = []string{opPub}, o.resolver, sysPub
}

// Creds is the credentials file (user.creds) of a new user that signer (an account key: the
// operator's Account, or one the server does not know) issued.
func (o *NATSOperator) Creds(tb testing.TB, signer nkeys.KeyPair) []byte {
	tb.Helper()
	user, err := nkeys.CreateUser()
	if err != nil {
		tb.Fatal(err)
	}
	pub, _ := user.PublicKey()
	uc := jwt.NewUserClaims(pub)
	uc.Name = "hookwarden"
	userJWT, err := uc.Encode(signer)
	if err != nil {
		tb.Fatal(err)
	}
	seed, _ := user.Seed()
	return CredsFile(userJWT, seed)
}

// CredsFile is a credentials file as nsc writes it, whatever the JWT and seed (jwt's
// FormatUserConfig refuses a seed that is not the JWT's user's, which a test of bad files
// needs).
func CredsFile(userJWT string, seed []byte) []byte {
	return fmt.Appendf(nil, "-----BEGIN NATS USER JWT-----\n%s\n------END NATS USER JWT------\n\n"+
		"************************* IMPORTANT *************************\n\n"+
		"-----BEGIN USER NKEY SEED-----\n%s\n------END USER NKEY SEED------\n", userJWT, seed)
}
