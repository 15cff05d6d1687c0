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
package kubernetes

import "embed"

// Manifests are the YAML files of this directory.
//
//go:embed *.yaml
var Manifests embed.FS
