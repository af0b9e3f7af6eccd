package api

import (
	"bytes"
	"crypto/hmac"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// signaturePrefix starts every webhook signature (apitype.WebhookSignature).
const signaturePrefix = "sha256="

// rotateWebhookSecret serves POST /v1/jobs/{id}/webhook: a new secret replaces any earlier
// one and is shown this once.
func (a *API) rotateWebhookSecret(w http.ResponseWriter, r *http.Request) error {
	j, err := a.findJob(r)
	if err != nil {
		return err
	}
	secret, err := a.eng.RotateWebhookSecret(r.Context(), j.ID, a.webhookSeal(j.ID))
	if errors.Is(err, model.ErrNotFound) {
		return &httpError{status: http.StatusNotFound, detail: fmt.Sprintf("job %q not found", j.ID)}
	}
	if err != nil {
		return err
	}
	path := "/v1/hooks/" + url.PathEscape(j.Name)
	if j.Namespace != model.DefaultNamespace {
		path += "?namespace=" + url.QueryEscape(j.Namespace)
	}
	noteAfter(r.Context(), apitype.WebhookSecret{JobID: j.ID, Path: path, Header: apitype.WebhookSignatureHeader}) // never the secret
	writeJSON(w, http.StatusCreated, apitype.WebhookSecret{JobID: j.ID, Secret: secret, Path: path, Header: apitype.WebhookSignatureHeader})
	return nil
}

// checkSignature is nil when r carries the signature of body under secret; else (no
// secret included) a 401 naming what the header must be. whose says whose secret it is.
func checkSignature(r *http.Request, secret string, body []byte, whose string) error {
	got := r.Header.Get(apitype.WebhookSignatureHeader)
	if secret == "" || !strings.HasPrefix(got, signaturePrefix) || !hmac.Equal([]byte(got), []byte(apitype.WebhookSignature(secret, body))) {
		return &httpError{status: http.StatusUnauthorized,
			detail: fmt.Sprintf("the %s header must be %s and the hex HMAC-SHA256 of the body keyed with the %s's webhook secret",
				apitype.WebhookSignatureHeader, signaturePrefix, whose)}
	}
	return nil
}

// hookArgs are a webhook body's args: a JSON object, or nothing.
func (a *API) hookArgs(body []byte) ([]byte, error) {
	b := bytes.TrimSpace(body)
	if len(b) == 0 {
		return nil, nil
	}
	if b[0] != '{' {
		return nil, invalidField("body", "must be a JSON object (the args) or empty")
	}
	if fe := (&fieldErrors{}); len(b) > a.lim.MaxArgsBytes {
		checkArgsSize(b, "body", a.lim, fe)
		return nil, invalidFields(fe.errs)
	}
	var obj map[string]any
	if err := decodeJSON(b, &obj); err != nil {
		return nil, err
	}
	return b, nil
}

// rotatePipelineWebhookSecret serves POST /v1/pipelines/{name}/webhook: a new secret
// replaces any earlier one and is shown this once.
func (a *API) rotatePipelineWebhookSecret(w http.ResponseWriter, r *http.Request) error {
	pl, err := a.findPipeline(r)
	if err != nil {
		return err
	}
	secret, err := a.eng.RotateWebhookSecret(r.Context(), pl.ID, a.webhookSeal(pl.ID))
	if errors.Is(err, model.ErrNotFound) {
		return &httpError{status: http.StatusNotFound, detail: fmt.Sprintf("pipeline %q not found", pl.ID)}
	}
	if err != nil {
		return err
	}
	path := "/v1/hooks/pipelines/" + url.PathEscape(pl.Name)
	if pl.Namespace != model.DefaultNamespace {
		path += "?namespace=" + url.QueryEscape(pl.Namespace)
	}
	noteAfter(r.Context(), apitype.WebhookSecret{PipelineID: pl.ID, Path: path, Header: apitype.WebhookSignatureHeader}) // never the secret
	writeJSON(w, http.StatusCreated, apitype.WebhookSecret{PipelineID: pl.ID, Secret: secret, Path: path, Header: apitype.WebhookSignatureHeader})
	return nil
}

// hookSecret returns the webhook secret of the job or pipeline found (nil: none found),
// "" when it has none. A caller that is not found gets "" too, so that its answer is the
// answer to a wrong signature: a webhook does not tell which names exist.
func (a *API) hookSecret(r *http.Request, id string) (string, error) {
	if id == "" {
		return "", nil
	}
	stored, err := a.store.WebhookSecret(r.Context(), &store.WebhookSecretParams{JobID: id})
	if errors.Is(err, model.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("webhook secret: %w", err)
	}
	return openWebhookSecret(a.keys, id, stored)
}

// webhookSeal is how a new webhook secret of ownerID is stored: sealed under the server's
// key, or (nil) in clear on a server without one.
func (a *API) webhookSeal(ownerID string) func(string) (string, error) {
	if a.keys == nil {
		return nil
	}
	return func(s string) (string, error) { return a.keys.Seal(s, webhookContext(ownerID)) }
}

// notFound reports whether err is the 404 of a lookup.
func notFound(err error) bool {
	var he *httpError
	return errors.As(err, &he) && he.status == http.StatusNotFound
}

// pipelineHook serves POST /v1/hooks/pipelines/{name}: a signed call starts a pipeline run
// (trigger event) whose args are the body, a JSON object (or nothing), over the pipeline's.
// A missing or wrong signature is 401 and starts nothing; so is a pipeline with no secret,
// and a pipeline that does not exist (the same answer). A disabled pipeline is 409. 201
// with the pipeline run.
func (a *API) pipelineHook(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	pl, err := a.findPipeline(r)
	if err != nil && !notFound(err) {
		return err
	}
	var plID string
	if pl != nil {
		plID = pl.ID
	}
	secret, err := a.hookSecret(r, plID)
	if err != nil {
		return err
	}
	if err := checkSignature(r, secret, body, "pipeline"); err != nil {
		return err
	}
	args, err := a.hookArgs(body)
	if err != nil {
		return err
	}
	if !pl.Enabled {
		return &httpError{status: http.StatusConflict, detail: fmt.Sprintf("pipeline %q is disabled: its webhook runs nothing until it is enabled", pl.Name)}
	}
	pr, err := a.eng.TriggerPipeline(r.Context(), pl, model.TriggerEvent, args)
	if err != nil {
		return fmt.Errorf("pipeline webhook %s: %w", pl.Name, err)
	}
	return a.writePipelineRun(w, r, http.StatusCreated, pr)
}

// hook serves POST /v1/hooks/{id}: the body, a JSON object (or nothing), becomes the run's
// args. A missing or wrong signature is 401 and creates nothing; so is a job with no
// secret, and a job that does not exist (the same answer). A disabled job is 409 (a manual
// trigger still runs it). An Idempotency-Key header dedupes deliveries.
func (a *API) hook(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	j, err := a.findJob(r)
	if err != nil && !notFound(err) {
		return err
	}
	var jobID string
	if j != nil {
		jobID = j.ID
	}
	secret, err := a.hookSecret(r, jobID)
	if err != nil {
		return err
	}
	if err := checkSignature(r, secret, body, "job"); err != nil {
		return err
	}
	args, err := a.hookArgs(body)
	if err != nil {
		return err
	}
	if !j.Enabled {
		return &httpError{status: http.StatusConflict, detail: fmt.Sprintf("job %q is disabled: its webhook runs nothing until it is enabled", j.Name)}
	}
	key := r.Header.Get("Idempotency-Key")
	if len(key) > maxKeyLen || hasControl(key) {
		return invalidField("Idempotency-Key", fmt.Sprintf("must be at most %d bytes without control characters", maxKeyLen))
	}
	return a.runNow(w, r, j, model.TriggerEvent, args, key)
}
