package kubernetes

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcdpool/etcdpool/agent"
	"github.com/etcdpool/etcdpool/config"
	"github.com/etcdpool/etcdpool/internal/testkit"
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
	cfg := parseArgs(t, spec, sc, config.ModeSidecar, "")
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
	// The resume state must outlive a restart of the sidecar container.
	for _, f := range []string{cfg.Sidecar.SeatFile, cfg.Sidecar.EnvPath(), agent.StatePath(cfg.Sidecar.SeatFile)} {
		if !within(scMount, f) {
			t.Errorf("sidecar writes %s outside the shared volume, mounted at %s", f, scMount)
		}
	}
}

// appStopBound is how long the app may keep running after the sidecar
// fails /readyz (the seat was lost, or its lease could end soon) or stops
// answering (it died), as documented in app-with-sidecar.yaml and README.
const appStopBound = 6 * time.Second

// TestSidecarDeploymentStopsAppOnLoss: the app's liveness probe is the
// sidecar's /readyz, and the kubelet stops the app within appStopBound of
// it failing; that is less than a dead sidecar's lease has left (2/3 of
// the TTL: it was kept alive every TTL/3), so an app whose sidecar died is
// stopped before its seat can be granted to another pod; and the sidecar's
// --app-stop-within covers it, so an app whose sidecar is cut off from
// etcd is stopped by the time the lease can end.
func TestSidecarDeploymentStopsAppOnLoss(t *testing.T) {
	sc, app, cfg, _ := inference(t)
	p := app.LivenessProbe
	if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != agent.ReadyzPath {
		t.Fatalf("app livenessProbe %+v, want GET %s of the sidecar", p, agent.ReadyzPath)
	}
	if got, want := probePort(t, app, p), listenPort(t, cfg.Sidecar.Listen); got != want {
		t.Errorf("app livenessProbe port %d, the sidecar listens on %d", got, want)
	}
	grace := int64(30) // the pod's default
	if g := p.TerminationGracePeriodSeconds; g != nil {
		grace = *g
	}
	bound := time.Duration(int64(p.PeriodSeconds*p.FailureThreshold+p.TimeoutSeconds)+grace) * time.Second
	if bound > appStopBound {
		t.Errorf("app stops up to %v after the seat is lost, documented bound %v", bound, appStopBound)
	}
	if ttl := cfg.Sidecar.TTL.D(); 3*bound >= 2*ttl {
		t.Errorf("app stops up to %v after its sidecar died; want less than 2/3 of the TTL %v", bound, ttl)
	}
	if lead := cfg.Sidecar.AppStopWithin.D(); lead < bound+time.Second {
		t.Errorf("sidecar --app-stop-within %v, but the app stops up to %v after /readyz fails, and the kubelet's probe timing and the kill need a second more: cut off from etcd, it could run on after its lease ended", lead, bound)
	}
	if sc.LivenessProbe != nil {
		t.Error("the sidecar has a livenessProbe: a restart while it waits loses its place in the queue")
	}
}

// TestSidecarDeploymentStartupProbeCoversWait: the kubelet must not
// restart a sidecar that is still in line for a seat; the sidecar gives up
// by itself at --wait-timeout.
func TestSidecarDeploymentStartupProbeCoversWait(t *testing.T) {
	sc, _, cfg, _ := inference(t)
	wait := cfg.Sidecar.WaitTimeout.D()
	if wait <= 0 {
		t.Fatal("no --wait-timeout: the startup probe would restart a waiting sidecar at the back of the queue")
	}
	p := sc.StartupProbe
	budget := time.Duration(p.PeriodSeconds*p.FailureThreshold) * time.Second
	if budget < wait+time.Minute {
		t.Errorf("startupProbe gives up after %v; want at least --wait-timeout %v + 1m", budget, wait)
	}
}

// inference returns the sidecar and app containers of the inference
// Deployment, the sidecar's configuration and where the app mounts the
// seat volume.
func inference(t *testing.T) (sc, app corev1.Container, cfg config.Config, appMount string) {
	t.Helper()
	d, ok := decodeAll(t).deployments["inference"]
	if !ok {
		t.Fatal("no inference Deployment")
	}
	spec := d.Spec.Template.Spec
	if len(spec.InitContainers) != 1 || len(spec.Containers) != 1 {
		t.Fatalf("want one sidecar and one app container, got %d and %d", len(spec.InitContainers), len(spec.Containers))
	}
	sc, app = spec.InitContainers[0], spec.Containers[0]
	return sc, app, parseArgs(t, spec, sc, config.ModeSidecar, ""), mountOf(app, seatVolume(t, spec))
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
	cfg := parseArgs(t, spec, c, config.ModeServe, testkit.WriteFile(t, "config.yaml", cm.Data[key]))
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

// TestAppEntryWaitsForHeldSeat runs the app container's own entry script
// (with the mount and the sidecar's address pointed at the test's) under
// /bin/sh: it must not start the app while /readyz fails, start it once
// the seat is held, and refuse a seat file that says the seat is lost.
func TestAppEntryWaitsForHeldSeat(t *testing.T) {
	if _, err := exec.LookPath("wget"); err != nil {
		t.Skip("wget is not installed; the app image (busybox) has it")
	}
	_, app, cfg, mount := inference(t)
	if len(app.Command) != 3 || app.Command[0] != "sh" || app.Command[1] != "-c" {
		t.Fatalf("app command %q, want sh -c SCRIPT", app.Command)
	}
	var ready atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != agent.ReadyzPath || !ready.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	script := app.Command[2]
	for from, to := range map[string]string{
		fmt.Sprintf("http://127.0.0.1:%d", listenPort(t, cfg.Sidecar.Listen)): srv.URL,
		mount: dir,
	} {
		if !strings.Contains(script, from) {
			t.Fatalf("app script does not use %s:\n%s", from, script)
		}
		script = strings.ReplaceAll(script, from, to)
	}
	files := agent.SeatFile{JSONPath: filepath.Join(dir, filepath.Base(cfg.Sidecar.SeatFile)),
		EnvPath: filepath.Join(dir, filepath.Base(cfg.Sidecar.EnvPath()))}
	run := func() (*exec.Cmd, *testkit.SyncBuffer) {
		var out testkit.SyncBuffer
		cmd := exec.Command("sh", "-c", script)
		cmd.Stdout, cmd.Env = &out, []string{"PATH=" + os.Getenv("PATH")}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		return cmd, &out
	}

	// A seat the sidecar reports lost is refused even if /readyz passed
	// a moment before.
	ready.Store(true)
	if err := files.Write(agent.SeatRecord{State: agent.StateLost, Pool: "gpu", Seat: 3, Token: 41}); err != nil {
		t.Fatal(err)
	}
	lost, out := run()
	exited := make(chan error, 1)
	go func() { exited <- lost.Wait() }()
	select {
	case err := <-exited:
		if err == nil || out.String() != "" {
			t.Fatalf("app on a lost seat: exit %v, output %q; want a failure and no start", err, out.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("app started on a lost seat: %q", out.String())
	}

	// While the sidecar holds no seat, the app waits.
	ready.Store(false)
	_, out = run()
	testkit.Consistently(t, 2500*time.Millisecond, "app not started", func() bool { return out.String() == "" })
	if err := files.Write(agent.SeatRecord{State: agent.StateHeld, Pool: "gpu", Seat: 3, Token: 42}); err != nil {
		t.Fatal(err)
	}
	ready.Store(true)
	testkit.Eventually(t, 5*time.Second, "app started", func() bool {
		return strings.Contains(out.String(), "holding seat 3 of gpu (token 42)")
	})
}
