package apitype

import "time"

// Doctor is the answer of GET /v1/doctor: the server's checks of its setup.
type Doctor struct {
	Server string        `json:"server"` // the answering server's id
	Time   time.Time     `json:"time"`   // its clock when it answered
	Checks []DoctorCheck `json:"checks"`
}

// DoctorCheck is one check: Status is "ok", "warn" or "fail"; Fix says what to do when it
// is not ok.
type DoctorCheck struct {
	Name    string `json:"name"`
	Status  string `json:"status"`
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"`
}

// Statuses of a DoctorCheck.
const (
	CheckOK   = "ok"
	CheckWarn = "warn"
	CheckFail = "fail"
)
