package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"

	"github.com/etcdpool/etcdpool/coordinator"
)

// Operation is something a principal may be allowed to do.
type Operation string

// Operations. Each endpoint needs one; admin includes all the others.
const (
	// OpClaim opens sessions and claims and releases seats through them.
	OpClaim Operation = "claim"
	// OpRead reads pools, seats, the queue, instances and events.
	OpRead Operation = "read"
	// OpForceRelease frees any seat of a pool, fenced by its token.
	OpForceRelease Operation = "force-release"
	// OpDrain marks an instance draining.
	OpDrain Operation = "drain"
	// OpAdmin creates and updates pools, and may do everything else.
	OpAdmin Operation = "admin"
)

// Operations lists every operation, in the order the docs give them.
var Operations = []Operation{OpClaim, OpRead, OpForceRelease, OpDrain, OpAdmin}

// TenantSelf in a principal's Tenants stands for the principal's own name.
const TenantSelf = "self"

// TenantAny in a principal's Tenants allows any tenant, or none.
const TenantAny = "*"

// Anonymous is the principal of requests without credentials when the
// server allows them (plain HTTP on loopback, the dev default): every
// operation, on every pool, for any tenant.
var Anonymous = Principal{Name: "anonymous", Pools: []string{"*"}, Tenants: []string{TenantAny}, Operations: []Operation{OpAdmin}}

// Principal is an authenticated client and what it may do. A request is
// the principal whose bearer token hashes to TokenSHA256, or whose
// verified client certificate names CertName (subject CN or a DNS SAN).
type Principal struct {
	// Name identifies the principal in release records and logs. Required;
	// a valid pool name (printable ASCII, no '/').
	Name string `json:"name"`
	// TokenSHA256 is the lowercase hex SHA-256 of the principal's bearer
	// token (`printf %s TOKEN | sha256sum`). Default none.
	TokenSHA256 string `json:"tokenSHA256,omitempty"`
	// CertName is the subject CN or DNS SAN of the principal's client
	// certificate, checked only when the server verifies client
	// certificates (api.tls.clientCAFile). Default none. A principal needs
	// a token hash, a cert name, or both.
	CertName string `json:"certName,omitempty"`
	// Pools are the pools the principal may act on, as path.Match globs
	// ("hearing-*", "*"). Required.
	Pools []string `json:"pools"`
	// Tenants are the tenants the principal may claim for: names, "self"
	// (its own name), or "*" (any tenant, or none). When the list is not
	// "*", every claim must name one of them, except that a claim naming
	// none is charged to "self" when the list has it. Empty: claims name
	// no tenant.
	Tenants []string `json:"tenants,omitempty"`
	// Operations are what the principal may do; see Operations. Required.
	Operations []Operation `json:"operations"`
}

// FieldError is a principal that fails validation: Field names the field
// within it.
type FieldError struct {
	Field string
	Msg   string
}

// Error implements error.
func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// ValidatePrincipals checks every principal and that names, token hashes
// and cert names are unique. The error is a *FieldError whose Field reads
// "[i].field".
func ValidatePrincipals(ps []Principal) error {
	seen := map[string]string{}
	for i, p := range ps {
		if err := p.validate(); err != nil {
			err.Field = fmt.Sprintf("[%d].%s", i, err.Field)
			return err
		}
		for _, k := range []string{"name=" + p.Name, "token=" + p.TokenSHA256, "cert=" + p.CertName} {
			if strings.HasSuffix(k, "=") {
				continue
			}
			if prev, dup := seen[k]; dup {
				return &FieldError{Field: fmt.Sprintf("[%d]", i), Msg: fmt.Sprintf("%s is also used by principal %q", strings.SplitN(k, "=", 2)[0], prev)}
			}
			seen[k] = p.Name
		}
	}
	return nil
}

func (p Principal) validate() *FieldError {
	if err := coordinator.ValidateName(p.Name); err != nil {
		return &FieldError{"name", fmt.Sprintf("%q: printable ASCII without '/' or spaces, 1..%d bytes", p.Name, coordinator.MaxNameLen)}
	}
	if p.TokenSHA256 == "" && p.CertName == "" {
		return &FieldError{"tokenSHA256", "set a token hash, a certName, or both: the principal has no way to authenticate"}
	}
	if b, err := hex.DecodeString(p.TokenSHA256); p.TokenSHA256 != "" && (err != nil || len(b) != sha256.Size || p.TokenSHA256 != strings.ToLower(p.TokenSHA256)) {
		return &FieldError{"tokenSHA256", "want 64 lowercase hex digits, the SHA-256 of the token (printf %s TOKEN | sha256sum)"}
	}
	if len(p.Pools) == 0 {
		return &FieldError{"pools", `list the pool globs the principal may use, e.g. ["hearing-*"]`}
	}
	for _, g := range p.Pools {
		if _, err := path.Match(g, ""); err != nil || g == "" {
			return &FieldError{"pools", fmt.Sprintf("%q is not a valid glob", g)}
		}
	}
	for _, t := range p.Tenants {
		if t != TenantSelf && t != TenantAny && coordinator.ValidateName(t) != nil {
			return &FieldError{"tenants", fmt.Sprintf("%q is not a tenant name, %q or %q", t, TenantSelf, TenantAny)}
		}
	}
	if len(p.Operations) == 0 {
		return &FieldError{"operations", fmt.Sprintf("list what the principal may do: %v", Operations)}
	}
	for _, op := range p.Operations {
		if !slices.Contains(Operations, op) {
			return &FieldError{"operations", fmt.Sprintf("%q is not one of %v", op, Operations)}
		}
	}
	return nil
}

// HashToken returns the lowercase hex SHA-256 of a bearer token, as
// Principal.TokenSHA256 stores it.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// may reports whether p may perform op on pool; admin may do everything.
func (p *Principal) may(op Operation, pool string) error {
	if !slices.Contains(p.Operations, op) && !slices.Contains(p.Operations, OpAdmin) {
		return fmt.Errorf("%w: principal %q may not %s", ErrForbidden, p.Name, op)
	}
	if pool != "" && !p.poolAllowed(pool) {
		return fmt.Errorf("%w: principal %q may not use pool %q", ErrForbidden, p.Name, pool)
	}
	return nil
}

// poolAllowed reports whether a glob of p matches pool.
func (p *Principal) poolAllowed(pool string) bool {
	for _, g := range p.Pools {
		if ok, _ := path.Match(g, pool); ok {
			return true
		}
	}
	return false
}

// tenantFor returns the tenant a claim is charged to: the one asked for if
// p may claim for it, "self" when none is asked and p has it.
func (p *Principal) tenantFor(asked string) (string, error) {
	if slices.Contains(p.Tenants, TenantAny) {
		return asked, nil
	}
	if asked == "" {
		switch {
		case slices.Contains(p.Tenants, TenantSelf):
			return p.Name, nil
		case len(p.Tenants) > 0:
			return "", fmt.Errorf("%w: principal %q must name a tenant, one of %v", ErrForbidden, p.Name, p.Tenants)
		}
		return "", nil
	}
	if (asked == p.Name && slices.Contains(p.Tenants, TenantSelf)) || (asked != TenantSelf && slices.Contains(p.Tenants, asked)) {
		return asked, nil
	}
	return "", fmt.Errorf("%w: principal %q may not claim for tenant %q", ErrForbidden, p.Name, asked)
}

// authenticator finds the principal of a request.
type authenticator struct {
	byToken   map[string]*Principal // by token hash
	byCert    map[string]*Principal
	anonymous bool
}

func newAuthenticator(ps []Principal, anonymous bool) *authenticator {
	a := &authenticator{byToken: map[string]*Principal{}, byCert: map[string]*Principal{}, anonymous: anonymous}
	for i := range ps {
		p := &ps[i]
		if p.TokenSHA256 != "" {
			a.byToken[p.TokenSHA256] = p
		}
		if p.CertName != "" {
			a.byCert[p.CertName] = p
		}
	}
	return a
}

// authenticate returns the request's principal: from its bearer token, its
// verified client certificate, or Anonymous when allowed and the request
// has neither. A token and a certificate of different principals are
// refused.
func (a *authenticator) authenticate(r *http.Request) (*Principal, error) {
	var byTok, byCert *Principal
	if h := r.Header.Get("Authorization"); h != "" {
		tok, ok := strings.CutPrefix(h, "Bearer ")
		if !ok || tok == "" {
			return nil, fmt.Errorf("%w: the Authorization header must be \"Bearer TOKEN\"", ErrUnauthenticated)
		}
		byTok = a.tokenPrincipal(tok)
		if byTok == nil {
			return nil, fmt.Errorf("%w: unknown bearer token", ErrUnauthenticated)
		}
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		byCert = a.certPrincipal(r.TLS.VerifiedChains[0][0])
	}
	switch {
	case byTok != nil && byCert != nil && byTok != byCert:
		return nil, fmt.Errorf("%w: the bearer token is %q's but the client certificate is %q's", ErrUnauthenticated, byTok.Name, byCert.Name)
	case byTok != nil:
		return byTok, nil
	case byCert != nil:
		return byCert, nil
	case a.anonymous:
		return &Anonymous, nil
	}
	return nil, fmt.Errorf("%w: send a bearer token or a client certificate", ErrUnauthenticated)
}

// tokenPrincipal looks up a token by its hash; the comparison of the hash
// found is constant-time.
func (a *authenticator) tokenPrincipal(tok string) *Principal {
	h := HashToken(tok)
	p := a.byToken[h]
	if p == nil || subtle.ConstantTimeCompare([]byte(p.TokenSHA256), []byte(h)) != 1 {
		return nil
	}
	return p
}

// certPrincipal matches a verified leaf's subject CN, then its DNS SANs.
func (a *authenticator) certPrincipal(leaf *x509.Certificate) *Principal {
	if p := a.byCert[leaf.Subject.CommonName]; p != nil && leaf.Subject.CommonName != "" {
		return p
	}
	for _, n := range leaf.DNSNames {
		if p := a.byCert[n]; p != nil {
			return p
		}
	}
	return nil
}
