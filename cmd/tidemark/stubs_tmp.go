package main

import "github.com/spf13/cobra"

func newDemoCmd() *cobra.Command  { return &cobra.Command{Use: "demo"} }
func newServeCmd() *cobra.Command { return &cobra.Command{Use: "serve"} }
