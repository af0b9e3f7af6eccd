package client

import (
	"context"
	"net/http"

	"github.com/stint-dev/stint/apitype"
)

// Plan asks the server what spec would do if it were submitted now (POST /v1/plan): the
// workers its run fits, best first, or why it fits none; a schedule's next fire times or
// when its run would be due; and what would hold the run back. The spec is validated as
// CreateJob's is (a bad field is an *apitype.Problem naming it); nothing is created.
func (c *Client) Plan(ctx context.Context, spec *apitype.JobSpec) (*apitype.PlanResponse, error) {
	var out apitype.PlanResponse
	if _, err := c.do(ctx, nil, http.MethodPost, "/v1/plan", nil, spec, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
