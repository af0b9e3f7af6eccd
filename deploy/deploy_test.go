package deploy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/stint-dev/stint/worker"
)

// object is the part of a Kubernetes object the checks read.
type object struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	StringData map[string]string `json:"stringData"`
	Resources  []string          `json:"resources"` // Kustomization
	Spec       struct {
		// Selector is {"matchLabels": {...}} in workloads and budgets, the labels themselves in
		// a Service; see selects.
		Selector map[string]any `json:"selector"`
		Template struct {
			Metadata struct {
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
			Spec podSpec `json:"spec"`
		} `json:"template"`
		Ports []struct {
			TargetPort any `json:"targetPort"`
		} `json:"ports"`
		MaxUnavailable any `json:"maxUnavailable"`
	} `json:"spec"`
}

type podSpec struct {
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds"`
	SecurityContext               struct {
		RunAsNonRoot bool `json:"runAsNonRoot"`
	} `json:"securityContext"`
	Containers []struct {
		Name  string   `json:"name"`
		Image string   `json:"image"`
		Args  []string `json:"args"`
		Ports []struct {
			Name string `json:"name"`
		} `json:"ports"`
		Env []struct {
			Name      string `json:"name"`
			ValueFrom *struct {
				SecretKeyRef *struct {
					Name string `json:"name"`
					Key  string `json:"key"`
				} `json:"secretKeyRef"`
			} `json:"valueFrom"`
		} `json:"env"`
		EnvFrom []struct {
			SecretRef *struct {
				Name string `json:"name"`
			} `json:"secretRef"`
		} `json:"envFrom"`
		ReadinessProbe *probe `json:"readinessProbe"`
		LivenessProbe  *probe `json:"livenessProbe"`
	} `json:"containers"`
}

type probe struct {
	HTTPGet struct {
		Path string `json:"path"`
	} `json:"httpGet"`
}

// manifests parses every document of every YAML file in kubernetes/, strictly enough that a
// syntax error or a duplicate key fails.
func manifests(t *testing.T) map[string][]object {
	t.Helper()
	files, err := filepath.Glob("kubernetes/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	out := map[string][]object{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var generic map[string]any
			require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &generic), "%s document %d", f, i)
			var o object
			require.NoError(t, yaml.Unmarshal([]byte(doc), &o), "%s document %d", f, i)
			out[filepath.Base(f)] = append(out[filepath.Base(f)], o)
		}
	}
	return out
}

// drainBudget is what a worker stopped with --drain-timeout d may take: the drain, the kill
// grace between SIGTERM and SIGKILL of a job, and the flush of the completions.
func drainBudget(t *testing.T, args []string) time.Duration {
	t.Helper()
	d := worker.DefaultDrainTimeout
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--drain-timeout="); ok {
			var err error
			d, err = time.ParseDuration(v)
			require.NoError(t, err)
		}
	}
	return d + worker.DefaultKillGrace + worker.DefaultFlushTimeout
}

func TestKubernetesManifests(t *testing.T) {
	all := manifests(t)

	// The API's own routes, as the OpenAPI document lists them (a test in internal/api keeps
	// it equal to the route table).
	var doc struct {
		Paths map[string]any `json:"paths"`
	}
	b, err := os.ReadFile("../internal/api/openapi.json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &doc))

	secrets := map[string]map[string]string{}
	for _, objs := range all {
		for _, o := range objs {
			if o.Kind == "Secret" {
				secrets[o.Metadata.Name] = o.StringData
			}
		}
	}
	var serverLabels map[string]string
	for file, objs := range all {
		for _, o := range objs {
			t.Run(file+"/"+o.Kind+"/"+o.Metadata.Name, func(t *testing.T) {
				require.NotEmpty(t, o.APIVersion)
				require.NotEmpty(t, o.Kind)
				if o.Kind == "Kustomization" {
					for _, r := range o.Resources {
						require.FileExists(t, filepath.Join("kubernetes", r))
					}
					return
				}
				require.NotEmpty(t, o.Metadata.Name)
				switch o.Kind {
				case "Deployment", "DaemonSet":
					require.True(t, selects(o.Spec.Selector["matchLabels"], o.Spec.Template.Metadata.Labels),
						"the selector matches the pod template")
					ps := o.Spec.Template.Spec
					require.True(t, ps.SecurityContext.RunAsNonRoot, "pods run as non-root")
					require.Len(t, ps.Containers, 1)
					c := ps.Containers[0]
					require.NotEmpty(t, c.Image)
					require.NotEmpty(t, c.Args)
					for _, e := range c.Env {
						if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
							require.Contains(t, secrets[e.ValueFrom.SecretKeyRef.Name], e.ValueFrom.SecretKeyRef.Key, "env %s", e.Name)
						}
					}
					for _, e := range c.EnvFrom {
						if e.SecretRef != nil {
							require.Contains(t, secrets, e.SecretRef.Name)
						}
					}
					switch c.Args[0] {
					case "server":
						serverLabels = o.Spec.Template.Metadata.Labels
						require.NotNil(t, c.ReadinessProbe)
						require.NotNil(t, c.LivenessProbe)
						require.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path, "ready when the store answers")
						require.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path, "alive whatever the store says")
						for _, p := range []string{c.ReadinessProbe.HTTPGet.Path, c.LivenessProbe.HTTPGet.Path} {
							require.Contains(t, doc.Paths, p, "the API serves the probe's path")
						}
					case "worker":
						require.NotNil(t, ps.TerminationGracePeriodSeconds)
						grace := time.Duration(*ps.TerminationGracePeriodSeconds) * time.Second
						require.Greater(t, grace, drainBudget(t, c.Args), "the worker drains and reports before the kubelet kills it")
					default:
						t.Fatalf("unknown stint command %q", c.Args[0])
					}
				}
			})
		}
	}

	require.NotNil(t, serverLabels, "a server Deployment")
	for file, objs := range all {
		for _, o := range objs {
			switch o.Kind {
			case "Service":
				require.True(t, selects(o.Spec.Selector, serverLabels), "%s: the Service selects the servers", file)
			case "PodDisruptionBudget":
				require.True(t, selects(o.Spec.Selector["matchLabels"], serverLabels), "%s: the budget covers the servers", file)
				require.NotNil(t, o.Spec.MaxUnavailable)
			}
		}
	}
}

// selects reports whether a selector's labels (a YAML map) are a non-empty subset of labels.
func selects(selector any, labels map[string]string) bool {
	m, ok := selector.(map[string]any)
	if !ok || len(m) == 0 {
		return false
	}
	for k, v := range m {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func TestSystemdWorkerStopsAfterDrain(t *testing.T) {
	b, err := os.ReadFile("systemd/stint-worker.service")
	require.NoError(t, err)
	keys := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok && !strings.HasPrefix(k, "#") {
			keys[k] = v
		}
	}
	require.NoError(t, sc.Err())
	require.Equal(t, "mixed", keys["KillMode"], "SIGTERM to the agent alone, which stops its jobs itself")
	stop, err := time.ParseDuration(keys["TimeoutStopSec"])
	require.NoError(t, err)
	require.Greater(t, stop, drainBudget(t, strings.Fields(keys["ExecStart"])))
}
