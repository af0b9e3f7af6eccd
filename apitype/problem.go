package apitype

// Problem is an RFC 9457 problem document, the body of every error answer
// (Content-Type application/problem+json).
type Problem struct {
	Type   string       `json:"type,omitempty"`
	Title  string       `json:"title"`
	Status int          `json:"status"`
	Detail string       `json:"detail,omitempty"`
	Errors []FieldError `json:"errors,omitempty"`
}

// FieldError names one bad field of a request.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Error makes a Problem usable as a Go error (the SDK returns it).
func (p *Problem) Error() string {
	s := p.Title
	if p.Detail != "" {
		s += ": " + p.Detail
	}
	for _, e := range p.Errors {
		s += "; " + e.Field + ": " + e.Message
	}
	return s
}
