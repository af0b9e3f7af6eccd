package api

import (
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/auth"
	"github.com/stint-dev/stint/internal/id"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// maxTokenNameLen bounds a token's name.
const maxTokenNameLen = 128

// listTokens serves GET /v1/tokens: every token, revoked ones included, oldest first.
func (a *API) listTokens(w http.ResponseWriter, r *http.Request) error {
	tks, err := a.store.ListTokens(r.Context())
	if err != nil {
		return fmt.Errorf("list tokens: %w", err)
	}
	out := apitype.TokenList{Items: make([]*apitype.Token, len(tks))}
	for i, tk := range tks {
		out.Items[i] = tokenToAPI(tk)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// createToken serves POST /v1/tokens: a new token, answered (201) with its secret, which is
// shown this once: the store keeps only its SHA-256.
func (a *API) createToken(w http.ResponseWriter, r *http.Request) error {
	var req apitype.CreateTokenRequest
	if err := decodeBody(r, &req, false); err != nil {
		return err
	}
	fe := &fieldErrors{}
	switch {
	case req.Name == "":
		fe.add("name", "is required: what the token is for (ci, grafana, worker-eu-1)")
	case len(req.Name) > maxTokenNameLen || hasControl(req.Name):
		fe.add("name", "must be at most %d bytes without control characters", maxTokenNameLen)
	}
	role := model.Role(req.Role)
	if !role.Valid() {
		fe.add("role", "must be one of admin, operator, viewer, worker")
	}
	for i, ns := range req.Namespaces {
		if !namePattern.MatchString(ns) {
			fe.add(fmt.Sprintf("namespaces[%d]", i), nameRule)
		} else if slices.Index(req.Namespaces, ns) < i {
			fe.add(fmt.Sprintf("namespaces[%d]", i), "repeats namespaces[%d]", slices.Index(req.Namespaces, ns))
		}
	}
	if req.WorkerID != "" && !workerIDPattern.MatchString(req.WorkerID) {
		fe.add("worker_id", "must be 1 to 128 letters, digits, '.', '_', ':', '@' or '-', starting with a letter or digit")
	}
	if len(fe.errs) == 0 {
		if err := auth.CheckToken(role, req.Namespaces, req.WorkerID); err != nil {
			field := "namespaces"
			if req.WorkerID != "" && role != model.RoleWorker {
				field = "worker_id"
			}
			fe.add(field, "%s", err.Error())
		}
	}
	if len(fe.errs) > 0 {
		return invalidFields(fe.errs)
	}
	secret, err := auth.NewSecret()
	if err != nil {
		return err
	}
	now := a.clock.Now()
	tk := &model.Token{ID: id.New(now), Name: req.Name, Role: role, Namespaces: req.Namespaces,
		WorkerID: req.WorkerID, Hash: auth.Hash(secret), CreatedAt: now}
	if _, err := a.eng.CreateToken(r.Context(), &store.CreateTokenParams{Token: tk}); err != nil {
		return err
	}
	by := "?"
	if p := principalOf(r.Context()); p != nil {
		by = p.Name
	}
	a.log.InfoContext(r.Context(), "token created", "token", tk.ID, "name", tk.Name, "role", string(tk.Role),
		"namespaces", tk.Namespaces, "worker_id", tk.WorkerID, "by", by)
	noteAudit(r.Context(), "token:"+tk.ID, nil)
	noteAfter(r.Context(), tokenToAPI(tk)) // never the secret
	writeJSON(w, http.StatusCreated, apitype.CreatedToken{Secret: secret, Token: *tokenToAPI(tk)})
	return nil
}

// revokeToken serves POST /v1/tokens/{id}/revoke: the token stops working at once on this
// server and within tokenCacheTTL on the others. It stays listed, with revoked_at; revoking
// it again changes nothing.
func (a *API) revokeToken(w http.ResponseWriter, r *http.Request) error {
	tokenID := r.PathValue("id")
	tk, err := a.eng.RevokeToken(r.Context(), tokenID)
	if errors.Is(err, model.ErrNotFound) {
		return &httpError{status: http.StatusNotFound, detail: fmt.Sprintf("token %q not found", tokenID)}
	}
	if err != nil {
		return err
	}
	a.tokens.forget(tk.ID)
	a.log.InfoContext(r.Context(), "token revoked", "token", tk.ID, "name", tk.Name)
	writeJSON(w, http.StatusOK, tokenToAPI(tk))
	return nil
}

func tokenToAPI(tk *model.Token) *apitype.Token {
	return &apitype.Token{ID: tk.ID, Name: tk.Name, Role: string(tk.Role), Namespaces: tk.Namespaces,
		WorkerID: tk.WorkerID, CreatedAt: tk.CreatedAt.UTC(), LastUsedAt: utcPtr(tk.LastUsedAt), RevokedAt: utcPtr(tk.RevokedAt)}
}
