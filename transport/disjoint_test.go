package transport_test

import (
	"strings"
	"testing"

	"github.com/tidemark/tidemark/eventlog"
	"github.com/tidemark/tidemark/transport"
	"github.com/tidemark/tidemark/work"
)

// TestStreamSubjectsOutsideReplySpace: every subject a tidemark stream
// captures lies outside _INBOX.>, the only space the service replies to,
// so no reply can be stored.
func TestStreamSubjectsOutsideReplySpace(t *testing.T) {
	subjects := append(eventlog.StreamConfig(1, false).Subjects, work.StreamConfig(1, false).Subjects...)
	subjects = append(subjects, "$KV."+eventlog.BucketName+".>")
	for _, s := range subjects {
		first, _, _ := strings.Cut(s, ".")
		if first == transport.InboxRoot || first == "*" || first == ">" {
			t.Errorf("stream subject %s overlaps the reply space %s.>", s, transport.InboxRoot)
		}
	}
}
