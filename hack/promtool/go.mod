// Wrapper module: builds promtool (Prometheus v3.x, Go module v0.3xx) to unit-test the chart's alerting rules.
module byok-operator/hack/promtool

go 1.26.7

require github.com/prometheus/prometheus v0.316.0
