// kubeget: GET one API path the way an in-cluster client does (KUBERNETES_SERVICE_HOST/PORT, the
// ServiceAccount token, TLS verified against the ServiceAccount's ca.crt) and print the body.
// Part of the real node's test image (hack/realnode/image.py); stdlib only.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: kubeget /api/v1/namespaces/NS/pods")
		os.Exit(2)
	}
	if err := get(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "kubeget:", err)
		os.Exit(1)
	}
}

func get(path string) error {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return fmt.Errorf("not in a pod: KUBERNETES_SERVICE_HOST/PORT unset")
	}
	token, err := os.ReadFile(saDir + "/token")
	if err != nil {
		return err
	}
	caPEM, err := os.ReadFile(saDir + "/ca.crt")
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("no certificate in %s/ca.crt", saDir)
	}
	c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	req, err := http.NewRequest("GET", "https://"+net.JoinHostPort(host, port)+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, body)
	}
	_, err = os.Stdout.Write(body)
	return err
}
