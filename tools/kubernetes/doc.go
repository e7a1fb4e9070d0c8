// Package kubernetes pins the Kubernetes release whose binaries the
// executors/kubernetes tests run as a throw-away cluster. Nothing imports it:
// hack/kubernetes.sh builds the `tool` directives of this module once per
// machine into a cache directory keyed by the version.
package kubernetes
