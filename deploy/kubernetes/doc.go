// Package kubernetes holds example manifests for running etcdpool on
// Kubernetes, embedded so that tests can check their wiring:
//
//   - app-with-sidecar.yaml: a Deployment whose pods hold one seat each
//     through poolagent as a native sidecar (an init container with
//     restartPolicy Always and a startup probe on /startupz), so the
//     application starts only once the seat is held, and read the claim
//     from a shared emptyDir.
//   - agent.yaml: a ConfigMap with a poolagent config and a Deployment that
//     runs `poolagent serve` to register the instances it lists.
//   - monitoring.yaml: Prometheus Operator PodMonitors for the agent's and
//     the sidecars' /metrics.
//
// Every pod runs as a non-root user with a read-only root filesystem, no
// capabilities, the RuntimeDefault seccomp profile, resource requests and
// a memory limit, and a pinned image; etcd is reached over TLS with a
// client certificate and a password file from Secrets. app-with-sidecar.yaml
// also has a PodDisruptionBudget. The tests decode every document strictly
// (the PodMonitor against a structural copy of its schema) and check this
// wiring against poolagent's real flags and config loader.
package kubernetes

import "embed"

// Manifests are the YAML files of this directory.
//
//go:embed *.yaml
var Manifests embed.FS
