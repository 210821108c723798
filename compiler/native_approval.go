package compiler

import (
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/cikit/cikit"
)

// DefaultApprovalReason is the reason of a native job's gate when its
// approval: gives none.
const DefaultApprovalReason = "approval required by the pipeline"

// MaxApprovalDuration bounds a native approval's wait_timer and expires:
// 30 days, GitHub's longest wait timer.
const MaxApprovalDuration = 30 * 24 * time.Hour

// nativeApprovalKeys are the keys of an approval: mapping.
var nativeApprovalKeys = []string{"expires", "reason", "reviewers", "wait_timer"}

// nativeApproval reads a job's approval: true (a gate with the default
// reason), false or null (none), or a mapping of reason, reviewers,
// wait_timer and expires. A value with findings gives no gate, so that a
// broken one never passes for an approval the author did not mean.
func (c *checker) nativeApproval(v *yaml.Node, own owner) *cikit.Gate {
	switch {
	case isNull(v):
		return nil
	case v.Kind == yaml.ScalarNode && v.ShortTag() == "!!bool":
		if !strings.EqualFold(v.Value, "true") {
			return nil
		}
		return &cikit.Gate{Reasons: []string{DefaultApprovalReason}}
	case v.Kind != yaml.MappingNode:
		c.at(v, RuleType, `"approval"%s must be true, false or a mapping with "reason", "reviewers", "wait_timer" and "expires", got %s`, own.of(), kindName(v))
		return nil
	}
	g := &cikit.Gate{}
	ok := true
	for _, e := range c.entries(v) {
		val := c.resolve(e.val)
		switch e.name {
		case "reason":
			s, isText := c.scalar(val, "approval.reason", own)
			switch {
			case !isText:
				ok = ok && isNull(val)
			case strings.TrimSpace(s) == "":
				c.at(val, RuleValue, `"approval.reason"%s must say why the job waits for an approval, got an empty string`, own.of())
				ok = false
			case len(s) > cikit.MaxGateTextBytes:
				c.at(val, RuleLimit, `"approval.reason"%s is %d bytes, more than the %d a gate's text may have (cikit.MaxGateTextBytes)`, own.of(), len(s), cikit.MaxGateTextBytes)
				ok = false
			default:
				g.Reasons = []string{s}
			}
		case "reviewers":
			var rok bool
			g.Reviewers, rok = c.approvalReviewers(val, own)
			ok = ok && rok
		case "wait_timer":
			var dok bool
			g.WaitTimer, dok = c.approvalDuration(val, "approval.wait_timer", own)
			ok = ok && dok
		case "expires":
			var dok bool
			g.Expires, dok = c.approvalDuration(val, "approval.expires", own)
			ok = ok && dok
		default:
			if hint := c.suggest(e.name, nativeApprovalKeys); hint != "" {
				c.at(e.key, RuleKey, `unknown key %q in "approval"%s%s`, e.name, own.of(), didYouMean(hint))
			} else {
				c.at(e.key, RuleKey, `unknown key %q in "approval"%s (valid keys: %s)`, e.name, own.of(), strings.Join(nativeApprovalKeys, ", "))
			}
			ok = false
		}
	}
	if !ok {
		return nil
	}
	if len(g.Reasons) == 0 {
		g.Reasons = []string{DefaultApprovalReason}
	}
	return g
}

// approvalReviewers reads who may approve: a list of user names and
// "role:NAME" entries. A repeated entry is dropped without a finding: the
// meaning is the same.
func (c *checker) approvalReviewers(v *yaml.Node, own owner) ([]string, bool) {
	if isNull(v) {
		return nil, true
	}
	if v.Kind != yaml.SequenceNode {
		c.at(v, RuleType, `"approval.reviewers"%s must be a list of user names or "role:NAME", got %s`, own.of(), kindName(v))
		return nil, false
	}
	if len(v.Content) > cikit.MaxGateReviewers {
		c.at(v, RuleLimit, `"approval.reviewers"%s lists %d reviewers, more than the %d a gate may have (cikit.MaxGateReviewers); name a role instead ("role:approve")`, own.of(), len(v.Content), cikit.MaxGateReviewers)
		return nil, false
	}
	ok := true
	var out []string
	for _, item := range v.Content {
		iv := c.resolve(item)
		s, isText := text(iv)
		switch {
		case !isText || iv.ShortTag() != "!!str":
			c.at(item, RuleType, `entries of "approval.reviewers"%s must be user names or "role:NAME", got %s`, own.of(), kindName(iv))
			ok = false
		case len(s) > cikit.MaxGateTextBytes:
			c.at(item, RuleLimit, `an entry of "approval.reviewers"%s is %d bytes, more than the %d a gate's text may have (cikit.MaxGateTextBytes)`, own.of(), len(s), cikit.MaxGateTextBytes)
			ok = false
		case !validReviewer(s):
			c.at(item, RuleValue, `invalid reviewer %q%s: a user name (letters, digits, ".", "_" and "-", starting with a letter or digit) or "role:NAME"`, s, own.of())
			ok = false
		default:
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out, ok
}

// validReviewer reports whether s is a user name (as GitHub's and
// GitLab's are: letters, digits, ".", "_" and "-", starting with a letter
// or digit) or a role, "role:" and such a name.
func validReviewer(s string) bool {
	s = strings.TrimPrefix(s, "role:")
	for i := 0; i < len(s); i++ {
		b := s[i]
		switch {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		case i > 0 && (b == '.' || b == '_' || b == '-'):
		default:
			return false
		}
	}
	return s != ""
}

// approvalDuration reads a wait_timer or expires: a Go duration from 0
// to MaxApprovalDuration.
func (c *checker) approvalDuration(v *yaml.Node, key string, own owner) (time.Duration, bool) {
	if isNull(v) {
		return 0, true
	}
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" {
		c.at(v, RuleType, `%q%s must be a duration such as "10m" or "72h", got %s`, key, own.of(), kindName(v))
		return 0, false
	}
	d, err := time.ParseDuration(v.Value)
	switch {
	case err != nil:
		c.at(v, RuleValue, `invalid %s %q%s: use a duration such as "10m", "90m" or "72h"`, key, v.Value, own.of())
	case d < 0:
		c.at(v, RuleValue, `%s%s must not be negative, got %q`, key, own.of(), v.Value)
	case d > MaxApprovalDuration:
		c.at(v, RuleValue, `%s%s is %q, longer than 720h (30 days), the longest a gate waits`, key, own.of(), v.Value)
	default:
		return d, true
	}
	return 0, false
}
