package bench

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// scrapeMetrics reads a server's /metrics at url in Prometheus' text format
// and returns every sample by its series, name and labels as the server
// wrote them (`offsetd_commits_total{result="ok"}`).
func scrapeMetrics(hc *http.Client, url string) (map[string]float64, error) {
	resp, err := hc.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: status %d", url, resp.StatusCode)
	}
	samples := make(map[string]float64)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		// A label value may hold spaces (route="GET /metrics"); the
		// value is the last field (the server writes no timestamps).
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			return nil, fmt.Errorf("GET %s: line %q", url, line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("GET %s: %s: %w", url, line[:i], err)
		}
		samples[line[:i]] = v
	}
	return samples, sc.Err()
}
