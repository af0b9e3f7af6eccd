package store

import (
	"errors"

	"github.com/stint-dev/stint/internal/model"
)

// Anonymous reports whether CreateJobs stores nj as its first run alone, with no jobs row:
// a one-off job whose definition adds nothing to that run. The run then carries the job's
// spec in a column of its own, and the job is read back from it (GetJob). Such a job is:
//
//   - unnamed (the API names an unnamed job by its id), so no name needs to stay unique;
//   - without an idempotency key, whose (namespace, key) must stay unique among jobs;
//   - enabled, without a schedule and with its first run, so nothing fires it again;
//   - without a concurrency policy, key, limit or rate, and its run Plain (no slot to
//     admit it under, no dependency to wait for);
//   - not the member of a DAG and without alert thresholds of its own;
//   - submitted (trigger submit) with no run idempotency key, its run naming it.
//
// A webhook secret is set on an existing job, never at creation: setting one, like every
// other change to the job (update, delete, trigger, backfill), first gives it its jobs row
// and takes the spec off its run, and from then on it is a job like any other.
func Anonymous(nj NewJob) bool {
	j, r := nj.Job, nj.Run
	if j == nil || r == nil || !Plain(r) {
		return false
	}
	s := &j.Spec
	return j.Name == j.ID && j.IdempotencyKey == "" &&
		j.Enabled && j.NextFireAt == nil && s.Schedule == nil &&
		s.Concurrency == (model.Concurrency{}) && s.DAG == nil && s.Alerts == nil &&
		r.JobID == j.ID && r.Trigger == model.TriggerSubmit && r.IdempotencyKey == ""
}

// AnonymousJob is the job that anonymous run r stands for, spec being the spec r carries:
// what GetJob answers for the job's id. An anonymous job is enabled, has no next fire, key
// or request hash, and was created (and last updated) with its run.
func AnonymousJob(r *model.Run, spec model.JobSpec) *model.Job {
	return &model.Job{ID: r.JobID, Namespace: r.Namespace, Name: r.JobName, Spec: spec, Enabled: true,
		CreatedAt: r.CreatedAt, UpdatedAt: r.CreatedAt}
}

// CreateRunsOfAnonymous finishes a CreateRuns of runs whose results are res: the runs that
// failed with model.ErrNotFound may belong to anonymous jobs, which have no jobs row. It
// gives those jobs their rows (materialize, given their ids, says how many it wrote) and,
// when it wrote any, creates those runs again (create) and answers with what that says.
// Making the row changes nothing a reader sees, so it may commit on its own.
func CreateRunsOfAnonymous(runs []*model.Run, res []CreateRunResult,
	materialize func(jobIDs []string) (int, error),
	create func([]*model.Run) ([]CreateRunResult, error)) ([]CreateRunResult, error) {
	var (
		again []int
		ids   []string
	)
	for i, r := range res {
		if errors.Is(r.Err, model.ErrNotFound) && runs[i] != nil {
			again = append(again, i)
			ids = append(ids, runs[i].JobID)
		}
	}
	if len(again) == 0 {
		return res, nil
	}
	n, err := materialize(ids)
	if err != nil || n == 0 {
		return res, err
	}
	retry := make([]*model.Run, len(again))
	for k, i := range again {
		retry[k] = runs[i]
	}
	res2, err := create(retry)
	if err != nil {
		return nil, err
	}
	for k, i := range again {
		res[i] = res2[k]
	}
	return res, nil
}
