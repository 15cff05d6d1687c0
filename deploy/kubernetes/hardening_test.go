package kubernetes

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/etcdpool/etcdpool/agent"
	"github.com/etcdpool/etcdpool/config"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// poolagentContainer is a poolagent container of a Deployment with the
// configuration it runs with.
type poolagentContainer struct {
	deployment string
	spec       corev1.PodSpec
	c          corev1.Container
	cfg        config.Config
	listen     string
}

// poolagents returns every poolagent container of the manifests.
func poolagents(t *testing.T, objs objects) []poolagentContainer {
	t.Helper()
	var out []poolagentContainer
	for _, name := range slices.Sorted(maps.Keys(objs.deployments)) {
		spec := objs.deployments[name].Spec.Template.Spec
		for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
			if !strings.Contains(c.Image, "/poolagent:") || len(c.Args) == 0 {
				continue
			}
			pc := poolagentContainer{deployment: name, spec: spec, c: c}
			switch c.Args[0] {
			case "serve":
				cm, key := configMapFor(t, objs, spec, c, argValue(c.Args, "--config"))
				pc.cfg = parseArgs(t, spec, c, config.ModeServe, testkit.WriteFile(t, "config.yaml", cm.Data[key]))
				pc.listen = pc.cfg.Agent.Listen
			case "sidecar":
				pc.cfg = parseArgs(t, spec, c, config.ModeSidecar, "")
				pc.listen = pc.cfg.Sidecar.Listen
			default:
				t.Fatalf("%s/%s: unknown poolagent command %q", name, c.Name, c.Args[0])
			}
			out = append(out, pc)
		}
	}
	if len(out) < 2 {
		t.Fatalf("found %d poolagent containers, want the agent and the sidecar", len(out))
	}
	return out
}

// TestContainersHardened checks every container of every Deployment for
// what a platform team's admission policy (Pod Security "restricted")
// asks, plus resources and a pinned image.
func TestContainersHardened(t *testing.T) {
	for name, d := range decodeAll(t).deployments {
		spec := d.Spec.Template.Spec
		psc := spec.SecurityContext
		if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil ||
			psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: pod securityContext %+v: want runAsNonRoot and the RuntimeDefault seccomp profile", name, psc)
		}
		if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
			t.Errorf("%s: the pods do not call the Kubernetes API; set automountServiceAccountToken: false", name)
		}
		for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
			where := name + "/" + c.Name
			sc := c.SecurityContext
			if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
				sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
				sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
				t.Errorf("%s: securityContext %+v: want no privilege escalation, a read-only root and all capabilities dropped", where, sc)
			}
			r := c.Resources
			if r.Requests.Cpu().IsZero() || r.Requests.Memory().IsZero() || r.Limits.Memory().IsZero() {
				t.Errorf("%s: resources %+v: want cpu and memory requests and a memory limit", where, r)
			} else if r.Limits.Memory().Cmp(*r.Requests.Memory()) < 0 {
				t.Errorf("%s: memory limit below its request", where)
			}
			repo, tag, ok := strings.Cut(c.Image[strings.LastIndex(c.Image, "/")+1:], ":")
			if !ok || tag == "" || tag == "latest" {
				t.Errorf("%s: image %q: pin a release tag, not :latest or none (%s)", where, c.Image, repo)
			}
		}
	}
}

// TestEtcdCredentialsFromSecrets checks that every poolagent talks to
// etcd over TLS with a client certificate and a password, all read from
// files of mounted Secrets, never from the manifest.
func TestEtcdCredentialsFromSecrets(t *testing.T) {
	for _, p := range poolagents(t, decodeAll(t)) {
		where := p.deployment + "/" + p.c.Name
		e := p.cfg.Etcd
		for _, ep := range e.Endpoints {
			if !strings.HasPrefix(strings.ToLower(ep), "https://") {
				t.Errorf("%s: endpoint %s is not https", where, ep)
			}
		}
		if e.Username == "" || e.PasswordFile == "" {
			t.Errorf("%s: user %q, password file %q: want a user whose password is in a file", where, e.Username, e.PasswordFile)
		}
		for _, env := range p.c.Env {
			if env.Name == "ETCDPOOL_PASSWORD" {
				t.Errorf("%s: the password is in the environment; mount it from a Secret as a file", where)
			}
		}
		for field, path := range map[string]string{"passwordFile": e.PasswordFile, "tls.caFile": e.TLS.CAFile,
			"tls.certFile": e.TLS.CertFile, "tls.keyFile": e.TLS.KeyFile} {
			if !inSecret(p.spec, p.c, path) {
				t.Errorf("%s: etcd.%s %q is not in a mounted Secret", where, field, path)
			}
		}
	}
}

// inSecret reports whether path lies in a Secret volume mounted in c.
func inSecret(spec corev1.PodSpec, c corev1.Container, path string) bool {
	for _, v := range spec.Volumes {
		if m := mountOf(c, v.Name); v.Secret != nil && m != "" && path != "" && within(m, path) {
			return true
		}
	}
	return false
}

// TestScrapeConfigHitsMetrics checks that the PodMonitors and the
// prometheus.io annotations point at the port where each poolagent serves
// /metrics, and that every poolagent is scraped both ways.
func TestScrapeConfigHitsMetrics(t *testing.T) {
	objs := decodeAll(t)
	monitored := map[string]bool{}
	for _, p := range poolagents(t, objs) {
		where := p.deployment + "/" + p.c.Name
		port := listenPort(t, p.listen)
		tmpl := objs.deployments[p.deployment].Spec.Template
		a := tmpl.Annotations
		if a["prometheus.io/scrape"] != "true" || a["prometheus.io/port"] != strconv.Itoa(port) || a["prometheus.io/path"] != agent.MetricsPath {
			t.Errorf("%s: annotations %v, want scrape true, port %d, path %s", where, a, port, agent.MetricsPath)
		}
		for name, pm := range objs.podMonitors {
			sel, err := labelsSelector(pm)
			if err != nil {
				t.Fatalf("PodMonitor %s: %v", name, err)
			}
			if !sel.Matches(labels.Set(tmpl.Labels)) {
				continue
			}
			for _, ep := range pm.Spec.PodMetricsEndpoints {
				if containerPort(p.c, ep.Port) == port && ep.Path == agent.MetricsPath {
					monitored[where] = true
				}
			}
		}
		if !monitored[where] {
			t.Errorf("%s: no PodMonitor scrapes %s on its port %d", where, agent.MetricsPath, port)
		}
	}
	for name, pm := range objs.podMonitors {
		if pm.Namespace != "" || len(pm.Spec.PodMetricsEndpoints) == 0 {
			t.Errorf("PodMonitor %s: namespace %q, %d endpoints", name, pm.Namespace, len(pm.Spec.PodMetricsEndpoints))
		}
	}
}

func labelsSelector(pm *podMonitor) (labels.Selector, error) {
	ls := pm.Spec.Selector
	if len(ls.MatchLabels) == 0 && len(ls.MatchExpressions) == 0 {
		return labels.Nothing(), nil
	}
	return labels.ValidatedSelectorFromSet(ls.MatchLabels)
}

// containerPort returns the number of c's port named name, or 0.
func containerPort(c corev1.Container, name string) int {
	for _, p := range c.Ports {
		if p.Name == name {
			return int(p.ContainerPort)
		}
	}
	return 0
}

// TestDisruptionBudgets checks that each PodDisruptionBudget selects a
// Deployment and leaves room to evict one of its pods: a budget that no
// eviction can satisfy blocks node drains.
func TestDisruptionBudgets(t *testing.T) {
	objs := decodeAll(t)
	if len(objs.pdbs) == 0 {
		t.Fatal("no PodDisruptionBudget")
	}
	for name, pdb := range objs.pdbs {
		var matched bool
		for dname, d := range objs.deployments {
			sel := labels.SelectorFromSet(pdb.Spec.Selector.MatchLabels)
			if !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				continue
			}
			matched = true
			replicas := int32(1)
			if d.Spec.Replicas != nil {
				replicas = *d.Spec.Replicas
			}
			if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() >= int(replicas) || pdb.Spec.MinAvailable.IntValue() < 1 {
				t.Errorf("PodDisruptionBudget %s: minAvailable %v with %d replicas of %s: want 1..replicas-1", name, pdb.Spec.MinAvailable, replicas, dname)
			}
		}
		if !matched {
			t.Errorf("PodDisruptionBudget %s selects no Deployment", name)
		}
	}
}
