// A minimal etcd for the Kubernetes lab: one member on loopback, its data in the folder given.
package main

import (
	"flag"
	"log"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	dataDir := flag.String("data-dir", "", "where etcd keeps its data")
	clientURL := flag.String("listen-client-urls", "http://127.0.0.1:2379", "client URL")
	peerURL := flag.String("listen-peer-urls", "http://127.0.0.1:2380", "peer URL")
	flag.Parse()
	cfg := embed.NewConfig()
	cfg.Dir = *dataDir
	client, err := url.Parse(*clientURL)
	if err != nil {
		log.Fatal(err)
	}
	peer, err := url.Parse(*peerURL)
	if err != nil {
		log.Fatal(err)
	}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*client}, []url.URL{*client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	cfg.LogLevel = "warn"
	server, err := embed.StartEtcd(cfg)
	if err != nil {
		log.Fatal(err)
	}
	<-server.Server.ReadyNotify()
	log.Printf("etcd ready on %s", client)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-stop:
	case err := <-server.Err():
		log.Print(err)
	}
	server.Close()
}
