module github.com/idemkit/idem/idemotel

go 1.26.0

require (
	github.com/idemkit/idem v0.0.0-00010101000000-000000000000
	go.opentelemetry.io/otel v1.16.0
	go.opentelemetry.io/otel/metric v1.16.0
	go.opentelemetry.io/otel/trace v1.16.0
)

require (
	github.com/go-logr/logr v1.2.4 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
)

replace github.com/idemkit/idem => ..
