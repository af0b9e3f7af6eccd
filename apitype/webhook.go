package apitype

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
)

// WebhookSignatureHeader carries a webhook call's signature: WebhookSignature of its body.
const WebhookSignatureHeader = "X-Stint-Signature"

// WebhookSignature is the signature of a webhook body under a job's secret: "sha256=" and
// the hex HMAC-SHA256 of the body keyed with the secret.
func WebhookSignature(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}
