package cli

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/stint-dev/stint/apitype"
)

// secretEnvFlag is the repeatable --secret-env: KEY=VALUE, or KEY alone for the value of
// the variable KEY of the CLI's own environment (so that the value is not on the command
// line). The values are read when the command runs (resolve); String never shows them.
type secretEnvFlag struct{ entries []string }

func (f *secretEnvFlag) String() string {
	names := make([]string, len(f.entries))
	for i, e := range f.entries {
		k, _, _ := strings.Cut(e, "=")
		names[i] = k + "=" + apitype.SecretMask
	}
	return strings.Join(names, ",")
}

func (f *secretEnvFlag) Set(s string) error {
	if k, _, _ := strings.Cut(s, "="); k == "" {
		return fmt.Errorf("want KEY=VALUE, or KEY to take the value of KEY from this environment")
	}
	f.entries = append(f.entries, s)
	return nil
}

func (f *secretEnvFlag) Type() string { return "key[=value]" }

// resolve returns the flag's variables with their values, a bare KEY's from getenv; a later
// entry of a key wins.
func (f *secretEnvFlag) resolve(getenv func(string) string) (map[string]string, error) {
	if len(f.entries) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(f.entries))
	for _, e := range f.entries {
		k, v, ok := strings.Cut(e, "=")
		if !ok {
			if v = getenv(k); v == "" {
				return nil, Usagef("--secret-env %s: %s is not set in this environment (or give %s=VALUE)", k, k, k)
			}
		}
		out[k] = v
	}
	return out, nil
}

// expandSecretEnv fills the secret_env values of a job or pipeline file written "${NAME}"
// with the variable NAME of the CLI's environment, so that the file holds no secret; field
// names the spec in errors ("jobs[0]"). "***" is left as it is: it keeps the stored value.
func expandSecretEnv(env map[string]string, field string, getenv func(string) string) error {
	for _, k := range slices.Sorted(maps.Keys(env)) {
		v := env[k]
		if !strings.HasPrefix(v, "${") || !strings.HasSuffix(v, "}") {
			continue
		}
		name := v[2 : len(v)-1]
		got := getenv(name)
		if got == "" {
			return fmt.Errorf("%s.secret_env.%s: %s is not set in this environment", field, k, v)
		}
		env[k] = got
	}
	return nil
}

// expandFileSecrets expands the secret_env of every job and pipeline step of a file.
func expandFileSecrets(f *jobFile, getenv func(string) string) error {
	for i := range f.Jobs {
		if err := expandSecretEnv(f.Jobs[i].SecretEnv, fmt.Sprintf("jobs[%d]", i), getenv); err != nil {
			return err
		}
	}
	for i := range f.Pipelines {
		if err := expandStepSecrets(&f.Pipelines[i], fmt.Sprintf("pipelines[%d].", i), getenv); err != nil {
			return err
		}
	}
	return nil
}

// expandStepSecrets expands the secret_env of a pipeline's steps; prefix names the
// pipeline in errors ("pipelines[1]." or "").
func expandStepSecrets(p *apitype.PipelineSpec, prefix string, getenv func(string) string) error {
	for _, step := range slices.Sorted(maps.Keys(p.Steps)) {
		s := p.Steps[step]
		if err := expandSecretEnv(s.SecretEnv, prefix+"steps."+step, getenv); err != nil {
			return err
		}
	}
	return nil
}
