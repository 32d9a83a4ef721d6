package receiver

import (
	"fmt"
	"net/http"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/internal/routesecret"
	"github.com/hookwarden/hookwarden/receiver/deliver"
	"github.com/hookwarden/hookwarden/receiver/store"
)

// OneHTTPSink is the sink list of a route whose one sink is an HTTP sink at url named
// store.DefaultSink, as spec.delivery.sink gives.
func OneHTTPSink(url string) []deliver.Sink {
	return []deliver.Sink{{Name: store.DefaultSink, HTTP: &deliver.HTTPTarget{URL: url, Header: http.Header{}}}}
}

// buildSinks turns a subscription's spec.delivery into the sinks the pool delivers to, with the
// material the manager copied into the route Secret (sec's data; nil: none yet). A sink that
// cannot take events yet (a filter that does not compile, credentials or a resolved URL not
// yet in the route Secret, a kind this receiver does not send to) carries its Problem: its
// events wait, the others go on.
func buildSinks(d *hookv1.DeliverySpec, data map[string][]byte) []deliver.Sink {
	specs := d.EffectiveSinks()
	if len(specs) == 0 {
		return nil
	}
	out := make([]deliver.Sink, 0, len(specs))
	for _, spec := range specs {
		s := deliver.Sink{Name: spec.Name, MaxAttempts: int(spec.MaxAttempts)}
		var problems []string
		if spec.Filter != "" {
			f, err := deliver.CompileFilter(spec.Filter)
			if err != nil {
				problems = append(problems, err.Error())
			}
			s.Filter = f
		}
		if spec.Ordering != nil {
			s.OrderBy = spec.Ordering.Key
		}
		switch {
		case spec.HTTP != nil:
			t, err := httpTarget(spec.Name, spec.HTTP.URL, spec.HTTP, data)
			if err != nil {
				problems = append(problems, err.Error())
			}
			s.HTTP = t
		case spec.Ref != nil:
			url := data[routesecret.SinkKey(spec.Name, routesecret.SinkFieldURL)]
			if len(url) == 0 {
				problems = append(problems, fmt.Sprintf("the manager has not resolved %s %s to a URL yet", spec.Ref.Kind, spec.Ref.Name))
				break
			}
			t, err := httpTarget(spec.Name, string(url), nil, data)
			if err != nil {
				problems = append(problems, err.Error())
			}
			s.HTTP = t
		case spec.Kafka != nil:
			p, err := kafka(spec.Name, spec.Kafka, data)
			if err != nil {
				problems = append(problems, err.Error())
			}
			s.Publisher = p
		case spec.NATS != nil:
			p, err := jetStream(spec.Name, spec.NATS, data)
			if err != nil {
				problems = append(problems, err.Error())
			}
			s.Publisher = p
		case spec.AMQP != nil:
			p, err := rabbitMQ(spec.Name, spec.AMQP, data)
			if err != nil {
				problems = append(problems, err.Error())
			}
			s.Publisher = p
		}
		if len(problems) > 0 {
			s.Problem = problems[0]
			for _, p := range problems[1:] {
				s.Problem += "; " + p
			}
		}
		out = append(out, s)
	}
	return out
}

// jetStream builds a NATS JetStream sink's publisher, with the credentials the route Secret
// holds for it (a credentials file, a token, or username and password) and its TLS material.
func jetStream(name string, spec *hookv1.NATSSink, data map[string][]byte) (deliver.Publisher, error) {
	key := func(field string) []byte { return data[routesecret.SinkKey(name, field)] }
	auth := deliver.JetStreamAuth{Creds: key(routesecret.SinkFieldCreds), Token: string(key(routesecret.SinkFieldToken)),
		Username: string(key(routesecret.SinkFieldUsername)), Password: string(key(routesecret.SinkFieldPassword))}
	if spec.Credentials != nil && len(auth.Creds) == 0 && auth.Token == "" && auth.Username == "" {
		return nil, fmt.Errorf("the route Secret holds no %s, %s nor %s yet (the manager copies the sink's credentials there)",
			routesecret.SinkKey(name, routesecret.SinkFieldCreds), routesecret.SinkKey(name, routesecret.SinkFieldToken),
			routesecret.SinkKey(name, routesecret.SinkFieldUsername))
	}
	if spec.TLS != nil {
		m, err := brokerTLS(name, spec.TLS, data)
		if err != nil {
			return nil, err
		}
		auth.TLS, auth.TLSMaterial = true, m
	}
	p, err := deliver.NewJetStream(spec.URLs, spec.Subject, auth)
	if err != nil {
		return nil, fmt.Errorf("sink %s: %w", name, err)
	}
	return p, nil
}

// rabbitMQ builds a RabbitMQ sink's publisher from the URL (credentials included) and TLS
// material the route Secret holds for it.
func rabbitMQ(name string, spec *hookv1.AMQPSink, data map[string][]byte) (deliver.Publisher, error) {
	url := data[routesecret.SinkKey(name, routesecret.SinkFieldURL)]
	if len(url) == 0 {
		return nil, fmt.Errorf("the route Secret holds no %s yet (the manager copies the sink's URL there)", routesecret.SinkKey(name, routesecret.SinkFieldURL))
	}
	m, err := brokerTLS(name, spec.TLS, data)
	if err != nil {
		return nil, err
	}
	p, err := deliver.NewAMQP(string(url), spec.Exchange, spec.RoutingKey, m)
	if err != nil {
		return nil, fmt.Errorf("sink %s: %w", name, err)
	}
	return p, nil
}

// kafka builds a Kafka sink's producer, with the SASL credentials and TLS material the route
// Secret holds for it.
func kafka(name string, spec *hookv1.KafkaSink, data map[string][]byte) (deliver.Publisher, error) {
	var key deliver.KafkaKey
	if spec.Key != nil {
		switch spec.Key.Source {
		case hookv1.KafkaKeyNone:
			key.None = true
		case hookv1.KafkaKeyPath:
			key.Path = spec.Key.Path
		}
	}
	var c deliver.KafkaConfig
	if spec.TLS != nil {
		m, err := brokerTLS(name, spec.TLS, data)
		if err != nil {
			return nil, err
		}
		c.TLS, c.TLSMaterial = true, m
	}
	if spec.SASL != nil {
		c.SASLMechanism = string(spec.SASL.Mechanism)
		c.Username = string(data[routesecret.SinkKey(name, routesecret.SinkFieldUsername)])
		c.Password = string(data[routesecret.SinkKey(name, routesecret.SinkFieldPassword)])
		if c.Username == "" || c.Password == "" {
			return nil, fmt.Errorf("the route Secret holds no %s and %s yet (the manager copies the sink's credentials there)",
				routesecret.SinkKey(name, routesecret.SinkFieldUsername), routesecret.SinkKey(name, routesecret.SinkFieldPassword))
		}
	}
	p, err := deliver.NewKafka(spec.BootstrapServers, spec.Topic, key, c)
	if err != nil {
		return nil, fmt.Errorf("sink %s: %w", name, err)
	}
	return p, nil
}

// brokerTLS is the TLS material the route Secret holds for a broker sink's TLS settings.
func brokerTLS(name string, spec *hookv1.BrokerTLS, data map[string][]byte) (deliver.TLSMaterial, error) {
	var m deliver.TLSMaterial
	if spec == nil {
		return m, nil
	}
	var missing []string
	need := func(set bool, field string) []byte {
		v := data[routesecret.SinkKey(name, field)]
		if set && len(v) == 0 {
			missing = append(missing, routesecret.SinkKey(name, field))
		}
		return v
	}
	m.CAPEM = need(spec.CABundle != nil, routesecret.SinkFieldCA)
	m.CertPEM = need(spec.ClientCertificate != nil, routesecret.SinkFieldCert)
	m.KeyPEM = need(spec.ClientCertificate != nil, routesecret.SinkFieldKey)
	if len(missing) > 0 {
		return m, fmt.Errorf("the route Secret holds no %v yet (the manager copies the sink's credentials there)", missing)
	}
	return m, nil
}

// httpTarget builds an HTTP sink's target: its URL, extra headers and the credentials the
// route Secret holds for it.
func httpTarget(name, url string, spec *hookv1.HTTPSink, data map[string][]byte) (*deliver.HTTPTarget, error) {
	key := func(field string) []byte { return data[routesecret.SinkKey(name, field)] }
	headers := http.Header{}
	var auth deliver.HTTPAuth
	if spec != nil {
		for _, h := range spec.Headers {
			headers.Add(h.Name, h.Value)
		}
		if a := spec.Auth; a != nil {
			var missing []string
			need := func(set bool, field string) []byte {
				v := key(field)
				if set && len(v) == 0 {
					missing = append(missing, routesecret.SinkKey(name, field))
				}
				return v
			}
			auth.BearerToken = string(need(a.BearerToken != nil, routesecret.SinkFieldBearerToken))
			auth.Username = string(need(a.Basic != nil, routesecret.SinkFieldUsername))
			auth.Password = string(need(a.Basic != nil, routesecret.SinkFieldPassword))
			auth.CertPEM = need(a.ClientCertificate != nil, routesecret.SinkFieldCert)
			auth.KeyPEM = need(a.ClientCertificate != nil, routesecret.SinkFieldKey)
			auth.CAPEM = need(a.CABundle != nil, routesecret.SinkFieldCA)
			if len(missing) > 0 {
				return nil, fmt.Errorf("the route Secret holds no %v yet (the manager copies the sink's credentials there)", missing)
			}
		}
	}
	t, err := deliver.NewHTTPTarget(url, headers, auth, nil)
	if err != nil {
		return nil, fmt.Errorf("sink credentials: %w", err)
	}
	return t, nil
}

// orderKeys are the ordering keys of ev for the sinks that order their events (nil: none).
func orderKeys(sinks []deliver.Sink, ev store.Event) map[string]string {
	var keys map[string]string
	for _, s := range sinks {
		if s.OrderBy != "" {
			if keys == nil {
				keys = map[string]string{}
			}
			keys[s.Name] = deliver.OrderKey(s.OrderBy, ev)
		}
	}
	return keys
}

// sinkNames are the names of sinks, in order (nil for none: the store's default sink).
func sinkNames(sinks []deliver.Sink) []string {
	if len(sinks) == 0 {
		return nil
	}
	names := make([]string, len(sinks))
	for i, s := range sinks {
		names[i] = s.Name
	}
	return names
}
