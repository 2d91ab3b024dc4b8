package main

import (
	"github.com/spf13/cobra"
)

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "tidemark",
		Short:         "Event-sourced promotion control plane over NATS JetStream",
		Long:          "Event-sourced promotion control plane over NATS JetStream.\n\n" + exitHelp,
		Version:       versionInfo(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("{{.Version}}")
	root.AddCommand(newScenarioCmd(), newDemoCmd(), newServeCmd(), newReplayCmd(), newAuditCmd(), newStatusCmd(), newPlanCmd(), newPromoteCmd(), newRepairsCmd(), newWorkerCmd(), newApplyCmd(), newBenchCmd(), newEventsCmd(), newVersionCmd(), newQueryCmd(), newVerifyCmd(), newRollbackCmd(), newRestateCmd(), newDiffCmd(), newExplainCmd())
	return root
}
