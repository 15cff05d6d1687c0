package kubernetes

import (
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcdpool/etcdpool/agent"
	"github.com/etcdpool/etcdpool/agent/agenttest"
	"github.com/etcdpool/etcdpool/config"
)

func TestSidecarDeploymentWiring(t *testing.T) {
	d, ok := decodeAll(t).deployments["inference"]
	if !ok {
		t.Fatal("no inference Deployment")
	}
	spec := d.Spec.Template.Spec
	if len(spec.InitContainers) != 1 || len(spec.Containers) != 1 {
		t.Fatalf("want one sidecar init container and one app container, got %d and %d", len(spec.InitContainers), len(spec.Containers))
	}
	sc, app := spec.InitContainers[0], spec.Containers[0]
	if sc.RestartPolicy == nil || *sc.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("sidecar restartPolicy %v, want Always (a native sidecar)", sc.RestartPolicy)
	}
	if len(sc.Args) == 0 || sc.Args[0] != "sidecar" {
		t.Fatalf("sidecar args %q do not start with the sidecar command", sc.Args)
	}
	cfg := parseArgs(t, sc, config.ModeSidecar, "")
	if err := cfg.ValidateSidecar(); err != nil {
		t.Fatalf("sidecar config from the manifest: %v", err)
	}
	port := listenPort(t, cfg.Sidecar.Listen)
	if sc.StartupProbe == nil || sc.StartupProbe.HTTPGet == nil || sc.StartupProbe.HTTPGet.Path != agent.StartupzPath {
		t.Errorf("sidecar startupProbe %+v, want GET %s", sc.StartupProbe, agent.StartupzPath)
	} else if got := probePort(t, sc, sc.StartupProbe); got != port {
		t.Errorf("startupProbe port %d, sidecar listens on %d", got, port)
	}
	if sc.ReadinessProbe != nil {
		if sc.ReadinessProbe.HTTPGet.Path != agent.ReadyzPath || probePort(t, sc, sc.ReadinessProbe) != port {
			t.Errorf("readinessProbe %+v does not hit %s on %d", sc.ReadinessProbe.HTTPGet, agent.ReadyzPath, port)
		}
	}
	vol := seatVolume(t, spec)
	scMount, appMount := mountOf(sc, vol), mountOf(app, vol)
	if scMount == "" || appMount == "" {
		t.Fatalf("volume %q mounted at %q in the sidecar and %q in the app; want both", vol, scMount, appMount)
	}
	for _, f := range []string{cfg.Sidecar.SeatFile, cfg.Sidecar.EnvPath()} {
		if !within(scMount, f) {
			t.Errorf("sidecar writes %s outside the shared volume, mounted at %s", f, scMount)
		}
	}
}

// seatVolume returns the emptyDir volume of the pod; there must be one.
func seatVolume(t *testing.T, spec corev1.PodSpec) string {
	t.Helper()
	for _, v := range spec.Volumes {
		if v.EmptyDir != nil {
			return v.Name
		}
	}
	t.Fatal("no emptyDir volume for the seat file")
	return ""
}

func TestAgentDeploymentWiring(t *testing.T) {
	objs := decodeAll(t)
	d, ok := objs.deployments["poolagent"]
	if !ok {
		t.Fatal("no poolagent Deployment")
	}
	spec := d.Spec.Template.Spec
	c := spec.Containers[0]
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Fatalf("agent args %q do not start with serve", c.Args)
	}
	cfgPath := argValue(c.Args, "--config")
	cm, key := configMapFor(t, objs, spec, c, cfgPath)
	cfg := parseArgs(t, c, config.ModeServe, agenttest.WriteFile(t, "config.yaml", cm.Data[key]))
	if err := cfg.ValidateServe(); err != nil {
		t.Fatalf("agent config in ConfigMap %s: %v", cm.Name, err)
	}
	port := listenPort(t, cfg.Agent.Listen)
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != agent.ReadyzPath || probePort(t, c, p) != port {
		t.Errorf("readinessProbe %+v, want GET %s on %d", p, agent.ReadyzPath, port)
	}
	if c.LivenessProbe != nil {
		t.Error("agent has a livenessProbe: restarts during an etcd outage only delay re-registration")
	}
	grace := spec.TerminationGracePeriodSeconds
	if grace == nil || float64(*grace) <= cfg.Agent.DrainTimeout.D().Seconds() {
		t.Errorf("terminationGracePeriodSeconds %v must exceed agent.drainTimeout %v", grace, cfg.Agent.DrainTimeout)
	}
}

// configMapFor finds the ConfigMap volume mounted where --config points
// and returns it with the key that holds the file.
func configMapFor(t *testing.T, objs objects, spec corev1.PodSpec, c corev1.Container, path string) (*corev1.ConfigMap, string) {
	t.Helper()
	for _, v := range spec.Volumes {
		if v.ConfigMap == nil || mountOf(c, v.Name) != filepath.Dir(path) {
			continue
		}
		cm, ok := objs.configMaps[v.ConfigMap.Name]
		if !ok {
			t.Fatalf("volume %s refers to missing ConfigMap %s", v.Name, v.ConfigMap.Name)
		}
		key := filepath.Base(path)
		if _, ok := cm.Data[key]; !ok {
			t.Fatalf("ConfigMap %s has no key %s", cm.Name, key)
		}
		return cm, key
	}
	t.Fatalf("no ConfigMap volume mounted at %s", filepath.Dir(path))
	return nil, ""
}

func argValue(args []string, flag string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}
