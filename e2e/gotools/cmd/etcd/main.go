// Command etcd is a thin wrapper so the e2e harness can build a current etcd
// server from the Go module proxy (etcd's own root module uses replace
// directives and cannot be `go install`ed).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
