// Package deploy holds no code: it is the home of the deployment files (Dockerfile, systemd
// units, Kubernetes manifests; see docs/operations.md), and its tests check them: every
// manifest parses and has what it needs, probes name routes the API serves, and the stop
// timeouts leave a worker time to drain.
package deploy
