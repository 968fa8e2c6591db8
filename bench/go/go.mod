module deft.dev/bench

go 1.19

require deft.dev/deft v0.0.0

replace deft.dev/deft => ../../bindings/go
