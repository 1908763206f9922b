package server

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

type statusJSON struct {
	Status string `json:"status"`
}

// healthz is GET /healthz: the process is up and serving HTTP, whether or
// not its partitions have loaded.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, statusJSON{Status: "ok"})
}

// readyz is GET /readyz: every partition has loaded, so every request can
// be answered; on a node of a cluster, the node is also a voter of the
// cluster (not waiting to be added, nor removed).
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if e := s.requireReady(); e != nil {
		writeError(w, e)
		return
	}
	if e := s.clusterReady(); e != nil {
		e.status = http.StatusServiceUnavailable // a removed node's requests are 410, its /readyz as any other's
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, statusJSON{Status: "ready"})
}

// metricsHandler is GET /metrics, in Prometheus' exposition formats.
func metricsHandler(reg *prometheus.Registry) http.HandlerFunc {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP
}
