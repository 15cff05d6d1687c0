package kubernetes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/etcdpool/etcdpool/config"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// objects decodes every manifest strictly: unknown fields and duplicate
// keys fail, as they would be lost or refused by the API server.
type objects struct {
	deployments map[string]*appsv1.Deployment
	configMaps  map[string]*corev1.ConfigMap
	pdbs        map[string]*policyv1.PodDisruptionBudget
	podMonitors map[string]*podMonitor
}

func decodeAll(t *testing.T) objects {
	t.Helper()
	objs := objects{deployments: map[string]*appsv1.Deployment{}, configMaps: map[string]*corev1.ConfigMap{},
		pdbs: map[string]*policyv1.PodDisruptionBudget{}, podMonitors: map[string]*podMonitor{}}
	files, err := fs.Glob(Manifests, "*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	for _, f := range files {
		b, _ := fs.ReadFile(Manifests, f)
		for i, doc := range strings.Split(string(b), "\n---\n") {
			if err := objs.decode([]byte(doc)); err != nil {
				t.Fatalf("%s document %d: %v", f, i, err)
			}
		}
	}
	return objs
}

func (o objects) decode(doc []byte) error {
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(js, &tm); err != nil {
		return err
	}
	switch tm.APIVersion + "/" + tm.Kind {
	case "apps/v1/Deployment":
		d := &appsv1.Deployment{}
		err = strictDecode(js, d)
		o.deployments[d.Name] = d
	case "v1/ConfigMap":
		cm := &corev1.ConfigMap{}
		err = strictDecode(js, cm)
		o.configMaps[cm.Name] = cm
	case "policy/v1/PodDisruptionBudget":
		pdb := &policyv1.PodDisruptionBudget{}
		err = strictDecode(js, pdb)
		o.pdbs[pdb.Name] = pdb
	case "monitoring.coreos.com/v1/PodMonitor":
		pm := &podMonitor{}
		err = strictDecode(js, pm)
		o.podMonitors[pm.Name] = pm
	default:
		err = fmt.Errorf("unexpected kind %s/%s", tm.APIVersion, tm.Kind)
	}
	return err
}

// podMonitor is the part of the Prometheus Operator's PodMonitor
// (monitoring.coreos.com/v1) the manifests use, checked structurally
// rather than with the operator as a dependency: a field it does not list
// fails the strict decode, so a typo cannot pass for a setting.
type podMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector            metav1.LabelSelector `json:"selector"`
		PodMetricsEndpoints []struct {
			Port     string `json:"port"`
			Path     string `json:"path"`
			Interval string `json:"interval"`
		} `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

func strictDecode(js []byte, obj any) error {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	return dec.Decode(obj)
}

// parseArgs parses a container's poolagent arguments with the real flags
// and merges them as poolagent does. Downward-API variables get a
// placeholder value. The Secret volumes of spec mounted in c are stood in
// for by a temporary directory with a placeholder file for each key the
// manifests use; the paths in the returned config are the container's.
func parseArgs(t *testing.T, spec corev1.PodSpec, c corev1.Container, mode config.Mode, configFile string) config.Config {
	t.Helper()
	fset := pflag.NewFlagSet(c.Name, pflag.ContinueOnError)
	cfgPath := fset.String("config", "", "")
	if mode == config.ModeServe { // serve's own flags, outside the config
		fset.String("audit-log", "", "")
		fset.String("web-listen", "", "")
		fset.Bool("takeover", false, "")
	}
	config.BindFlags(fset, mode)
	if err := fset.Parse(c.Args[1:]); err != nil {
		t.Fatalf("container %s: args %q: %v", c.Name, c.Args, err)
	}
	toTemp, fromTemp := secretStandIns(t, spec, c)
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = toTemp.Replace(e.Value)
		if e.ValueFrom != nil {
			env[e.Name] = "placeholder"
		}
	}
	path := *cfgPath
	if configFile != "" {
		b, err := os.ReadFile(configFile)
		if err != nil {
			t.Fatal(err)
		}
		path = testkit.WriteFile(t, "config.yaml", toTemp.Replace(string(b)))
	}
	cfg, err := config.Load(path, mode, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, fset)
	if err != nil {
		t.Fatalf("container %s: %v", c.Name, err)
	}
	for _, f := range []*string{&cfg.Etcd.PasswordFile, &cfg.Etcd.TLS.CAFile, &cfg.Etcd.TLS.CertFile, &cfg.Etcd.TLS.KeyFile} {
		*f = fromTemp.Replace(*f)
	}
	return cfg
}

// secretKeys are the files the manifests expect in their Secrets.
var secretKeys = []string{"password", "ca.crt", "tls.crt", "tls.key"}

// secretStandIns creates a directory per Secret volume mounted in c, and
// returns replacers from the mount paths to those directories and back.
func secretStandIns(t *testing.T, spec corev1.PodSpec, c corev1.Container) (toTemp, fromTemp *strings.Replacer) {
	t.Helper()
	var to, from []string
	for _, v := range spec.Volumes {
		mount := mountOf(c, v.Name)
		if v.Secret == nil || mount == "" {
			continue
		}
		dir := t.TempDir()
		for _, k := range secretKeys {
			if err := os.WriteFile(filepath.Join(dir, k), []byte("placeholder\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		to, from = append(to, mount, dir), append(from, dir, mount)
	}
	return strings.NewReplacer(to...), strings.NewReplacer(from...)
}

// probePort resolves a probe's port, by number or by container port name.
func probePort(t *testing.T, c corev1.Container, p *corev1.Probe) int {
	t.Helper()
	if p == nil || p.HTTPGet == nil {
		t.Fatalf("container %s: probe is not an HTTP GET", c.Name)
	}
	if p.HTTPGet.Port.Type == intstr.Int {
		return p.HTTPGet.Port.IntValue()
	}
	for _, cp := range c.Ports {
		if cp.Name == p.HTTPGet.Port.StrVal {
			return int(cp.ContainerPort)
		}
	}
	t.Fatalf("container %s: probe port %q is not a named container port", c.Name, p.HTTPGet.Port.StrVal)
	return 0
}

func listenPort(t *testing.T, addr string) int {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(port)
	return n
}

// mountOf returns where c mounts volume, or "".
func mountOf(c corev1.Container, volume string) string {
	for _, m := range c.VolumeMounts {
		if m.Name == volume {
			return m.MountPath
		}
	}
	return ""
}

func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && !strings.HasPrefix(rel, "..")
}
