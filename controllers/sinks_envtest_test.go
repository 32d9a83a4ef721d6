package controllers_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/internal/routesecret"
)

var _ = Describe("Sink material for the receiver", Ordered, func() {
	const receiverNS = "hookwarden-sinks"
	var mgr *runningManager
	BeforeAll(func() {
		Expect(client.IgnoreAlreadyExists(k8s.Create(suiteCtx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: receiverNS}}))).To(Succeed())
		mgr = startManager(managerOptions{receiverNamespace: receiverNS})
	})
	AfterAll(func() {
		if mgr != nil {
			mgr.Stop()
		}
	})

	It("copies sink credentials and resolved addresses into the route Secret, follows a rotated Secret, and names each misconfigured sink in SinksReady", func() {
		t := newTenant()
		secret := func(name string, data map[string]string) *corev1.Secret {
			return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: name}, StringData: data}
		}
		Expect(k8s.Create(suiteCtx, secret("orders-token", map[string]string{"token": "t1"}))).To(Succeed())
		Expect(k8s.Create(suiteCtx, secret("audit-basic", map[string]string{"username": "audit", "password": "p1"}))).To(Succeed())
		// A NATS credentials file (the manager copies it as it is; the receiver parses it).
		Expect(k8s.Create(suiteCtx, secret("jwtbus-creds", map[string]string{"user.creds": "creds-v1"}))).To(Succeed())
		Expect(k8s.Create(suiteCtx, secret("jwtbus-ca", map[string]string{"ca.crt": "ca-pem"}))).To(Succeed())
		Expect(k8s.Create(suiteCtx, secret("jwtbus-client", map[string]string{corev1.TLSCertKey: "cert-pem", corev1.TLSPrivateKeyKey: "key-pem"}))).To(Succeed())
		Expect(k8s.Create(suiteCtx, secret("nokeys-creds", map[string]string{"nkey": "not a key the API names"}))).To(Succeed())
		Expect(k8s.Create(suiteCtx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: "ledger"},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8080}}},
		})).To(Succeed())

		s := t.sub("fanout", "https://hooks.example.com/hooks/sinks/fanout")
		s.Spec.Delivery = &hookv1.DeliverySpec{Sinks: []hookv1.Sink{
			{Name: "orders", HTTP: &hookv1.HTTPSink{URL: "https://orders.example.com/", Auth: &hookv1.HTTPAuth{BearerToken: &hookv1.SinkSecretKey{Name: "orders-token", Key: "token"}}}},
			{Name: "audit", HTTP: &hookv1.HTTPSink{URL: "https://audit.example.com/", Auth: &hookv1.HTTPAuth{Basic: &hookv1.SinkSecretRef{Name: "audit-basic"}}}},
			{Name: "ledger", Ref: &hookv1.RefSink{APIVersion: "v1", Kind: "Service", Name: "ledger"}},
			{Name: "bus", NATS: &hookv1.NATSSink{URLs: []string{"nats://127.0.0.1:4222"}, Subject: "hooks.fanout", Credentials: &hookv1.SinkSecretRef{Name: "bus-creds"}}},
			{Name: "jwtbus", NATS: &hookv1.NATSSink{URLs: []string{"tls://127.0.0.1:4222"}, Subject: "hooks.fanout", Credentials: &hookv1.SinkSecretRef{Name: "jwtbus-creds"},
				TLS: &hookv1.BrokerTLS{CABundle: &hookv1.SinkSecretKey{Name: "jwtbus-ca", Key: "ca.crt"}, ClientCertificate: &hookv1.SinkSecretRef{Name: "jwtbus-client"}}}},
			{Name: "typo", Filter: "type.startsWith(", HTTP: &hookv1.HTTPSink{URL: "https://typo.example.com/"}},
			{Name: "broker", Ref: &hookv1.RefSink{APIVersion: "eventing.knative.dev/v1", Kind: "Broker", Name: "default"}},
			{Name: "nokeys", NATS: &hookv1.NATSSink{URLs: []string{"nats://127.0.0.1:4222"}, Subject: "hooks.fanout", Credentials: &hookv1.SinkSecretRef{Name: "nokeys-creds"}}},
		}}
		Expect(k8s.Create(suiteCtx, s)).To(Succeed())
		expectReady(s) // a misconfigured sink never holds back the registration

		route := func(g Gomega) map[string][]byte { return routeSecretOf(g, receiverNS, s).Data }
		key := routesecret.SinkKey
		Eventually(func(g Gomega) {
			data := route(g)
			g.Expect(string(data[key("orders", routesecret.SinkFieldBearerToken)])).To(Equal("t1"))
			g.Expect(string(data[key("audit", routesecret.SinkFieldUsername)])).To(Equal("audit"))
			g.Expect(string(data[key("audit", routesecret.SinkFieldPassword)])).To(Equal("p1"))
			g.Expect(string(data[key("ledger", routesecret.SinkFieldURL)])).To(Equal("http://ledger." + t.ns + ".svc.cluster.local:8080"))
			g.Expect(string(data[key("jwtbus", routesecret.SinkFieldCreds)])).To(Equal("creds-v1"))
			g.Expect(string(data[key("jwtbus", routesecret.SinkFieldCA)])).To(Equal("ca-pem"))
			g.Expect(string(data[key("jwtbus", routesecret.SinkFieldCert)])).To(Equal("cert-pem"))
			g.Expect(string(data[key("jwtbus", routesecret.SinkFieldKey)])).To(Equal("key-pem"))
			g.Expect(data).NotTo(HaveKey(key("nokeys", routesecret.SinkFieldCreds)))
			g.Expect(routesecret.Data(data)).To(Equal(routesecret.Data(signingSecret(g, s).Data)), "the signing material is still there")
			c := condition(get(g, s), hookv1.ConditionSinksReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(hookv1.ReasonSinkMisconfigured))
			g.Expect(c.Message).To(ContainSubstring("sink bus: Secret " + t.ns + "/bus-creds not found"))
			g.Expect(c.Message).To(ContainSubstring("sink typo: filter does not compile"))
			g.Expect(c.Message).To(ContainSubstring("sink broker: Broker " + t.ns + "/default not found"))
			g.Expect(c.Message).To(ContainSubstring("sink nokeys: Secret " + t.ns + "/nokeys-creds has none of the keys user.creds, token, or username and password"))
			g.Expect(c.Message).NotTo(ContainSubstring("sink jwtbus"), "a NATS credentials file is copied, not refused")
			g.Expect(c.Message).NotTo(ContainSubstring("sink orders"))
			g.Expect(c.Message).NotTo(ContainSubstring("sink ledger"))
		}).Should(Succeed())

		By("rotating the bearer token and the NATS credentials file, and creating the missing NATS credentials")
		rotate := func(name, key, value string) {
			Eventually(func() error {
				cur := &corev1.Secret{}
				if err := k8s.Get(suiteCtx, types.NamespacedName{Namespace: t.ns, Name: name}, cur); err != nil {
					return err
				}
				cur.Data[key] = []byte(value)
				return k8s.Update(suiteCtx, cur)
			}).Should(Succeed())
		}
		rotate("orders-token", "token", "t2")
		rotate("jwtbus-creds", "user.creds", "creds-v2")
		Expect(k8s.Create(suiteCtx, secret("bus-creds", map[string]string{"token": "nats-token"}))).To(Succeed())
		Eventually(func(g Gomega) {
			data := route(g)
			g.Expect(string(data[key("orders", routesecret.SinkFieldBearerToken)])).To(Equal("t2"))
			g.Expect(string(data[key("bus", routesecret.SinkFieldToken)])).To(Equal("nats-token"))
			g.Expect(string(data[key("jwtbus", routesecret.SinkFieldCreds)])).To(Equal("creds-v2"))
			c := condition(get(g, s), hookv1.ConditionSinksReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Message).NotTo(ContainSubstring("sink bus"))
			g.Expect(c.Message).To(ContainSubstring("sink typo"))
		}).Should(Succeed())

		By("fixing the rest: SinksReady turns True")
		Eventually(func() error {
			cur := get(Default, s)
			cur.Spec.Delivery.Sinks = cur.Spec.Delivery.Sinks[:5]
			cur.Spec.Delivery.Sinks[0].Filter = "type.startsWith('checkout.')"
			return k8s.Update(suiteCtx, cur)
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			c := condition(get(g, s), hookv1.ConditionSinksReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "SinksReady: %s", c.Message)
		}).Should(Succeed())
	})
})
