package httpapi_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/httpapi"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// principals of the authorization tests; each one's token is its name
// followed by "-token".
func testPrincipals() []httpapi.Principal {
	p := func(name string, pools, tenants []string, ops ...httpapi.Operation) httpapi.Principal {
		return httpapi.Principal{Name: name, TokenSHA256: httpapi.HashToken(name + "-token"), Pools: pools, Tenants: tenants, Operations: ops}
	}
	all := []string{"*"}
	return []httpapi.Principal{
		p("court", []string{"hearing-*"}, []string{"self"}, httpapi.OpClaim),
		p("court2", []string{"hearing-*"}, []string{"self"}, httpapi.OpClaim),
		p("voice", []string{"calls"}, []string{"acme", "globex"}, httpapi.OpClaim, httpapi.OpRead),
		p("viewer", all, nil, httpapi.OpRead),
		p("ops", all, nil, httpapi.OpForceRelease, httpapi.OpDrain, httpapi.OpRead),
		p("admin", all, nil, httpapi.OpAdmin),
	}
}

// Requests without valid credentials get 401; the OpenAPI document needs
// none.
func TestAuthentication(t *testing.T) {
	e := newEnv(t, testPrincipals())
	e.do("GET", "/v1/pools", "", nil).want(t, "no credentials", 401, "unauthenticated")
	e.do("GET", "/v1/pools", "wrong", nil).want(t, "unknown token", 401, "unauthenticated")
	e.do("GET", "/v1/pools", "viewer-token", nil).want(t, "viewer", 200, "")
	req, _ := http.NewRequest("GET", e.url+"/v1/pools", nil)
	req.Header.Set("Authorization", "Basic dmlld2VyOng=")
	resp, err := e.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") == "" {
		t.Fatalf("basic auth: %d, WWW-Authenticate %q; want 401 with a challenge", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	e.do("GET", "/v1/openapi.json", "", nil).want(t, "openapi", 200, "")
}

// Each principal may act only on its pools, for its tenants, with its
// operations.
func TestAuthorizationGrants(t *testing.T) {
	e := newEnv(t, testPrincipals())
	e.createPool("hearing-1", coordinator.PoolSpec{Capacity: 5})
	e.createPool("calls", coordinator.PoolSpec{Capacity: 5})
	court, voice := e.session("court-token", 5), e.session("voice-token", 5)

	// Pools.
	e.claim("court-token", "calls", map[string]any{"session": court}).want(t, "court claims outside its pools", 403, "forbidden")
	c := e.claim("court-token", "hearing-1", map[string]any{"session": court}).want(t, "court claims", 201, "")
	if c.str("tenant") != "court" {
		t.Fatalf("court's claim without a tenant is charged to %q, want its own name", c.str("tenant"))
	}
	// Tenants.
	e.claim("court-token", "hearing-1", map[string]any{"session": court, "tenant": "acme"}).want(t, "court claims for another tenant", 403, "forbidden")
	e.claim("voice-token", "calls", map[string]any{"session": voice}).want(t, "voice claims without a tenant", 403, "forbidden")
	e.claim("voice-token", "calls", map[string]any{"session": voice, "tenant": "voice"}).want(t, "voice claims for itself", 403, "forbidden")
	e.claim("voice-token", "calls", map[string]any{"session": voice, "tenant": "acme"}).want(t, "voice claims for acme", 201, "")
	// Operations.
	e.do("POST", "/v1/sessions", "viewer-token", map[string]any{"ttl": 5}).want(t, "viewer opens a session", 403, "forbidden")
	e.do("GET", "/v1/pools/hearing-1/seats", "court-token", nil).want(t, "court reads", 403, "forbidden")
	e.do("GET", "/v1/pools/hearing-1/events", "court-token", nil).want(t, "court reads events", 403, "forbidden")
	e.do("GET", "/v1/pools/hearing-1/seats", "voice-token", nil).want(t, "voice reads outside its pools", 403, "forbidden")
	for _, path := range []string{"", "/seats", "/queue", "/instances"} {
		e.do("GET", "/v1/pools/hearing-1"+path, "viewer-token", nil).want(t, "viewer reads "+path, 200, "")
	}
	if r := e.do("GET", "/v1/pools", "voice-token", nil); len(r.list) != 1 {
		t.Fatalf("voice lists pools %s, want only calls", r.raw)
	}
	if r := e.do("GET", "/v1/pools", "viewer-token", nil); len(r.list) != 2 {
		t.Fatalf("viewer lists pools %s, want both", r.raw)
	}
	fr := map[string]any{"token": c.num("token"), "reason": "test"}
	seatPath := "/v1/pools/hearing-1/seats/" + itoa(c.num("seat"))
	e.do("POST", seatPath+"/force-release", "court-token", fr).want(t, "court force-releases", 403, "forbidden")
	e.do("POST", seatPath+"/force-release", "viewer-token", fr).want(t, "viewer force-releases", 403, "forbidden")
	e.do("POST", seatPath+"/force-release", "ops-token", fr).want(t, "ops force-releases", 200, "")
	if by := releasedBy(t, e, "hearing-1"); by != "ops" {
		t.Fatalf("force-release record by %q, want ops", by)
	}
	spec := map[string]any{"capacity": 3}
	e.do("PUT", "/v1/pools/hearing-2", "court-token", spec).want(t, "court creates a pool", 403, "forbidden")
	e.do("PUT", "/v1/pools/hearing-2", "ops-token", spec).want(t, "ops creates a pool", 403, "forbidden")
	e.do("PUT", "/v1/pools/hearing-2", "admin-token", spec).want(t, "admin creates a pool", 201, "")
	e.do("PUT", "/v1/pools/hearing-2", "admin-token", map[string]any{"capacity": 4}).want(t, "admin updates a pool", 200, "")

	agent, err := coordinator.NewSession(context.Background(), e.cli, coordinator.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agent.Close(context.Background()) })
	if _, err := e.co.RegisterInstance(context.Background(), "hearing-1", agent.Lease(), coordinator.Instance{ID: "room-a", Seats: 1}); err != nil {
		t.Fatal(err)
	}
	e.do("POST", "/v1/pools/hearing-1/instances/room-a/drain", "court-token", nil).want(t, "court drains", 403, "forbidden")
	r := e.do("POST", "/v1/pools/hearing-1/instances/room-a/drain", "ops-token", nil).want(t, "ops drains", 200, "")
	if r.str("state") != "draining" {
		t.Fatalf("drained instance %s", r.raw)
	}
	e.do("POST", "/v1/pools/hearing-1/instances/nosuch/drain", "ops-token", nil).want(t, "drain a missing instance", 404, "not_found")
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// releasedBy returns the "by" of the pool's only release record.
func releasedBy(t *testing.T, e *env, pool string) string {
	t.Helper()
	resp, err := e.cli.Get(context.Background(), coordinator.SegPrefix(e.co.Prefix(), pool, coordinator.SegReleased), clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("release records: %v, %v", resp, err)
	}
	v := string(resp.Kvs[0].Value)
	_, after, _ := strings.Cut(v, `"by":"`)
	by, _, _ := strings.Cut(after, `"`)
	return by
}

// A principal can use only its own sessions: not keep alive, claim on,
// release through, stream from or delete another's, nor guess a handle.
func TestSessionsBelongToTheirPrincipal(t *testing.T) {
	e := newEnv(t, testPrincipals())
	e.createPool("hearing-1", coordinator.PoolSpec{Capacity: 5})
	s := e.session("court-token", 5)
	c := e.claim("court-token", "hearing-1", map[string]any{"session": s, "holder": "bailiff"}).want(t, "claim", 201, "")
	forged := s[:17] + strings.Repeat("0", 32)

	e.do("POST", "/v1/sessions/"+s+"/keepalive", "court2-token", nil).want(t, "keepalive of another's session", 403, "forbidden")
	e.do("POST", "/v1/sessions/"+forged+"/keepalive", "court-token", nil).want(t, "keepalive with a forged secret", 403, "forbidden")
	e.claim("court2-token", "hearing-1", map[string]any{"session": s}).want(t, "claim on another's session", 403, "forbidden")
	e.claim("court-token", "hearing-1", map[string]any{"session": forged}).want(t, "claim with a forged secret", 403, "forbidden")
	rel := releasePath("hearing-1", c.num("seat"), c.num("token"), s)
	e.do("DELETE", rel, "court2-token", nil).want(t, "release through another's session", 403, "forbidden")
	e.do("GET", streamPath("hearing-1", c, s), "court2-token", nil).want(t, "loss stream of another's session", 403, "forbidden")
	e.do("DELETE", "/v1/sessions/"+s, "court2-token", nil).want(t, "delete another's session", 403, "forbidden")
	other := e.session("court2-token", 5)
	e.do("DELETE", releasePath("hearing-1", c.num("seat"), c.num("token"), other), "court2-token", nil).want(t, "release of a seat another session holds", 404, "not_held")

	e.do("DELETE", rel, "court-token", nil).want(t, "owner releases", 204, "")
	if by := releasedBy(t, e, "hearing-1"); by != "court" {
		t.Fatalf("release record by %q, want the principal court (the holder said bailiff)", by)
	}
}

// Client certificates verified against the client CA name principals; a
// token of another principal on the same request is refused.
func TestClientCertificates(t *testing.T) {
	ca := etcdtest.NewCA(t, "api")
	srvPair := ca.Issue(etcdtest.CertOptions{Name: "server", DNSNames: []string{"localhost"}})
	bot := ca.Issue(etcdtest.CertOptions{Name: "bot.example"})
	stranger := ca.Issue(etcdtest.CertOptions{Name: "stranger"})
	ps := append(testPrincipals(), httpapi.Principal{Name: "bot", CertName: "bot.example", Pools: []string{"*"}, Operations: []httpapi.Operation{httpapi.OpRead}})
	e := newEnv(t, ps)
	tcfg, err := httpapi.TLSConfig(srvPair.Cert, srvPair.Key, ca.File)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(e.srv.Handler())
	hs.TLS = tcfg
	hs.StartTLS()
	t.Cleanup(hs.Close)
	roots := x509.NewCertPool()
	pem, _ := os.ReadFile(ca.File)
	roots.AppendCertsFromPEM(pem)
	client := func(p etcdtest.Pair) *http.Client {
		cfg := &tls.Config{RootCAs: roots, ServerName: "localhost"}
		if p.Cert != "" {
			kp, err := tls.LoadX509KeyPair(p.Cert, p.Key)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Certificates = []tls.Certificate{kp}
		}
		return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
	}
	get := func(hc *http.Client, token string) int {
		req, _ := http.NewRequest("GET", hs.URL+"/v1/pools", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	cases := []struct {
		name  string
		pair  etcdtest.Pair
		token string
		want  int
	}{
		{"bot's certificate", bot, "", 200},
		{"unknown certificate", stranger, "", 401},
		{"no certificate, no token", etcdtest.Pair{}, "", 401},
		{"no certificate, a token", etcdtest.Pair{}, "viewer-token", 200},
		{"bot's certificate, viewer's token", bot, "viewer-token", 401},
	}
	for _, c := range cases {
		if got := get(client(c.pair), c.token); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

func TestValidatePrincipals(t *testing.T) {
	ok := httpapi.Principal{Name: "a", TokenSHA256: httpapi.HashToken("t"), Pools: []string{"*"}, Operations: []httpapi.Operation{httpapi.OpRead}}
	mod := func(f func(*httpapi.Principal)) []httpapi.Principal { p := ok; f(&p); return []httpapi.Principal{p} }
	cases := []struct {
		name  string
		ps    []httpapi.Principal
		field string
	}{
		{"bad name", mod(func(p *httpapi.Principal) { p.Name = "a/b" }), "[0].name"},
		{"no credential", mod(func(p *httpapi.Principal) { p.TokenSHA256 = "" }), "[0].tokenSHA256"},
		{"token not hex", mod(func(p *httpapi.Principal) { p.TokenSHA256 = "secret" }), "[0].tokenSHA256"},
		{"token upper case", mod(func(p *httpapi.Principal) { p.TokenSHA256 = strings.ToUpper(p.TokenSHA256) }), "[0].tokenSHA256"},
		{"no pools", mod(func(p *httpapi.Principal) { p.Pools = nil }), "[0].pools"},
		{"bad glob", mod(func(p *httpapi.Principal) { p.Pools = []string{"["} }), "[0].pools"},
		{"bad tenant", mod(func(p *httpapi.Principal) { p.Tenants = []string{"a b"} }), "[0].tenants"},
		{"no operations", mod(func(p *httpapi.Principal) { p.Operations = nil }), "[0].operations"},
		{"unknown operation", mod(func(p *httpapi.Principal) { p.Operations = []httpapi.Operation{"write"} }), "[0].operations"},
		{"duplicate token", []httpapi.Principal{ok, func() httpapi.Principal { p := ok; p.Name = "b"; return p }()}, "[1]"},
		{"duplicate name", []httpapi.Principal{ok, func() httpapi.Principal { p := ok; p.TokenSHA256 = ""; p.CertName = "x"; return p }()}, "[1]"},
	}
	for _, c := range cases {
		err := httpapi.ValidatePrincipals(c.ps)
		var fe *httpapi.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%s: %v, want a FieldError on %s", c.name, err, c.field)
		}
	}
	if err := httpapi.ValidatePrincipals([]httpapi.Principal{ok}); err != nil {
		t.Fatalf("valid principal: %v", err)
	}
}

// A claimant's errors name only what it sent: not the token or the lease
// another holder's seat is held under (a worker that fences by token takes
// the token as a credential), nor, in a 500, etcd's key paths, which go to
// the server's log under the ref the answer gives. Found by a review
// (2026-12-05): a 412 named the holder's token, a 404 its lease.
func TestClaimantErrorsHideOthersSeats(t *testing.T) {
	var logged testkit.SyncBuffer
	e := newEnv(t, testPrincipals(), httpapi.WithLogger(slog.New(slog.NewTextHandler(&logged, nil))))
	e.createPool("hearing-1", coordinator.PoolSpec{Capacity: 5})
	s := e.session("court-token", 5)
	c := e.claim("court-token", "hearing-1", map[string]any{"session": s}).want(t, "claim", 201, "")
	lease, err := strconv.ParseUint(s[:16], 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	held := strconv.FormatInt(c.num("token"), 10)
	leaseRe := `0*` + strconv.FormatUint(lease, 16)
	other := e.session("court2-token", 5)
	wrong := releasePath("hearing-1", c.num("seat"), c.num("token")+1000, other)
	for _, tt := range []struct {
		r      reply
		hidden *regexp.Regexp
	}{
		// It sent the holder's token: only the lease is not its to see.
		{e.do("DELETE", releasePath("hearing-1", c.num("seat"), c.num("token"), other), "court2-token", nil).want(t, "release under another's token", 404, "not_held"),
			regexp.MustCompile(`\b` + leaseRe + `\b`)},
		{e.do("DELETE", wrong, "court2-token", nil).want(t, "release under a wrong token", 412, "stale_token"),
			regexp.MustCompile(`\b(` + held + `|` + leaseRe + `)\b`)},
		{e.do("GET", strings.Replace(wrong, "?", "/events?", 1), "court2-token", nil).want(t, "loss stream under a wrong token", 412, "stale_token"),
			regexp.MustCompile(`\b(` + held + `|` + leaseRe + `)\b`)},
	} {
		if m := tt.hidden.FindString(tt.r.str("message")); m != "" {
			t.Errorf("message %q names %s, the holder's token or lease", tt.r.str("message"), m)
		}
	}

	// A key etcdpool did not write, under the pool: claims fail with
	// coordinator.ErrForeignKey, a 500.
	foreign := coordinator.SegPrefix(e.co.Prefix(), "hearing-1", coordinator.SegSeats) + "not-a-seat"
	if _, err := e.cli.Put(context.Background(), foreign, "x"); err != nil {
		t.Fatal(err)
	}
	r := e.claim("court-token", "hearing-1", map[string]any{"session": s}).want(t, "claim on a pool with a foreign key", 500, "internal")
	msg := r.str("message")
	_, ref, ok := strings.Cut(msg, "under ref ")
	if !ok || strings.Contains(msg, "not-a-seat") || strings.Contains(msg, "/") {
		t.Fatalf("500 message %q: want no key path, and a ref", msg)
	}
	if log := logged.String(); !strings.Contains(log, "ref="+ref) || !strings.Contains(log, "not-a-seat") {
		t.Fatalf("the server's log does not give ref %s with the cause:\n%s", ref, log)
	}
}
