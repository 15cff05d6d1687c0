package kubernetes

import (
	"strconv"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/etcdpool/etcdpool/config"
)

// TestAgentRolloutCannotDropHolders checks that a rollout of the agent
// Deployment cannot make two agents fight over the instances with holders
// on them: either no two pods overlap (Recreate), or the new pod takes the
// instances over (ETCDPOOL_TAKEOVER, which hands them over with their
// claims) before the old one is stopped (maxUnavailable 0), and only one
// pod runs.
func TestAgentRolloutCannotDropHolders(t *testing.T) {
	d, ok := decodeAll(t).deployments["poolagent"]
	if !ok {
		t.Fatal("no poolagent Deployment")
	}
	if r := d.Spec.Replicas; r != nil && *r != 1 {
		t.Errorf("replicas %d: every replica registers the same instances; keep 1", *r)
	}
	st := d.Spec.Strategy
	if st.Type == appsv1.RecreateDeploymentStrategyType {
		return
	}
	// An empty type is RollingUpdate, Kubernetes's default.
	var takeover bool
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.Name == config.EnvName("takeover") {
			takeover, _ = strconv.ParseBool(e.Value)
		}
	}
	if !takeover {
		t.Errorf("strategy %q without %s=true: the new agent waits for instances the old one holds and the rollout stalls",
			st.Type, config.EnvName("takeover"))
	}
	// Kubernetes rounds maxUnavailable down (its default, 25% of one
	// replica, is 0); whatever the manifest says must come to 0.
	maxUnavailable := intstr.FromString("25%")
	if ru := st.RollingUpdate; ru != nil && ru.MaxUnavailable != nil {
		maxUnavailable = *ru.MaxUnavailable
	}
	if n, err := intstr.GetScaledValueFromIntOrPercent(&maxUnavailable, 1, false); err != nil || n != 0 {
		t.Errorf("maxUnavailable %s (%d pod(s), err %v): want 0, so that the old agent stops only once the new one has taken over",
			maxUnavailable.String(), n, err)
	}
}
