package main

import (
	"github.com/spf13/cobra"
)

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "tidemark",
		Short:         "Event-sourced promotion control plane over NATS JetStream",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newScenarioCmd(), newDemoCmd(), newServeCmd(), newReplayCmd(), newAuditCmd(), newStatusCmd(), newPlanCmd(), newPromoteCmd(), newRepairsCmd(), newWorkerCmd(), newApplyCmd(), newBenchCmd())
	return root
}
