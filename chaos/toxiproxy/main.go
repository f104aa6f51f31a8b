// Command toxiproxy-server is Toxiproxy's server with one more toxic, "kafka" (package kafkatoxic): it acts
// on one Kafka API's requests or responses on a link, which Toxiproxy's own toxics, seeing only bytes,
// cannot. Everything else is Toxiproxy's server as released: the same API, proxies and toxics.
//
// Toxiproxy documents this way of adding a toxic: register it, then start the server from your own main
// (CREATING_TOXICS.md in github.com/Shopify/toxiproxy).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/Shopify/toxiproxy/v2"

	"kafka-chaos/toxiproxy/kafkatoxic"
)

func main() {
	host := flag.String("host", "127.0.0.1", "address of the API listener")
	port := flag.String("port", "8474", "port of the API listener")
	seed := flag.Int64("seed", time.Now().UnixNano(), "seed of Toxiproxy's toxicity draws")
	apis := flag.Bool("kafka-apis", false, "print the Kafka APIs the kafka toxic decodes (JSON) and exit")
	version := flag.Bool("version", false, "print the version and exit")
	flag.Parse()

	if *version {
		fmt.Printf("toxiproxy-server version %s (kafka-chaos: kafka toxic)\n", toxiproxyVersion())
		return
	}
	if *apis {
		out, _ := json.Marshal(kafkatoxic.APIs())
		fmt.Println(string(out))
		return
	}
	rand.Seed(*seed) //nolint:staticcheck // Toxiproxy draws toxicity from the global source

	logger := zerolog.New(os.Stderr).With().Timestamp().Logger().Level(zerolog.InfoLevel)
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), logger)
	addr := net.JoinHostPort(*host, *port)
	go func() {
		if err := server.Listen(addr); err != nil {
			logger.Err(err).Msg("API server ended")
			os.Exit(1)
		}
	}()

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	<-signals
	if err := server.Shutdown(); err != nil {
		logger.Err(err).Msg("shutdown")
	}
}

// toxiproxyVersion is the Toxiproxy module this server is built from (its own Version is set only by its
// release build's linker flags).
func toxiproxyVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/Shopify/toxiproxy/v2" {
				return d.Version
			}
		}
	}
	return toxiproxy.Version
}
