// Package benchstats collects per-iteration durations in benchmarks that
// time a figure and its floor interleaved in the same loop, and reports
// medians, tail percentiles and the ratio through testing.B metrics.
package benchstats

import (
	"sort"
	"testing"
	"time"
)

// Samples are durations of one measured operation.
type Samples []time.Duration

// Time runs fn and records how long it took.
func (s *Samples) Time(fn func()) {
	start := time.Now()
	fn()
	*s = append(*s, time.Since(start))
}

// Percentile returns the p-th percentile (0 < p <= 100).
func (s Samples) Percentile(p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	sorted := append(Samples(nil), s...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	i := int(float64(len(sorted))*p/100+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// Micros is d in microseconds, the unit of every timing metric here.
func Micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// Ratio is the median of figure over the median of floor; 0 without a
// floor.
func Ratio(figure, floor Samples) float64 {
	f := floor.Percentile(50)
	if f <= 0 {
		return 0
	}
	return float64(figure.Percentile(50)) / float64(f)
}

// Report reports the median, p90 and p99 of figure and floor in
// microseconds, and the ratio of the medians.
func Report(b *testing.B, figure, floor Samples) {
	b.Helper()
	b.ReportMetric(Micros(figure.Percentile(50)), "p50-us")
	b.ReportMetric(Micros(figure.Percentile(90)), "p90-us")
	b.ReportMetric(Micros(figure.Percentile(99)), "p99-us")
	b.ReportMetric(Micros(floor.Percentile(50)), "floor-p50-us")
	b.ReportMetric(Micros(floor.Percentile(99)), "floor-p99-us")
	if r := Ratio(figure, floor); r > 0 {
		b.ReportMetric(r, "ratio")
	}
	b.ReportMetric(0, "ns/op") // the loop time mixes figure and floor: not a figure
}
