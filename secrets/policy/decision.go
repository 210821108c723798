package policy

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/secrets"
)

// Decision is a policy's answer for one job: the value of its decision
// rule, an object with these JSON names.
//
//	{
//	  "decision": "allow" | "require_approval" | "deny",   // required
//	  "reason": "…",                 // required unless allow; ≤ 512 bytes
//	  "secrets_scopes": ["repo:acme/api", …],  // absent or []: no secrets
//	  "cache_scope": "fork/pr-7",    // absent or "": the default scope
//	  "token_permissions": {"contents": "read"},  // absent: no cap
//	  "runner_labels_allowed": ["*", "!self-hosted"]  // absent: any runner
//	}
//
// Any other field, a value of the wrong type, or a value out of its
// bounds makes the answer an error (see Validate): a policy that answers
// nonsense decides nothing, and callers fail closed.
type Decision struct {
	Decision cikit.Decision `json:"decision"`
	Reason   string         `json:"reason,omitempty"`
	// SecretsScopes are secrets.Scope strings ("repo:acme/api").
	SecretsScopes []string `json:"secrets_scopes"`
	CacheScope    string   `json:"cache_scope,omitempty"`
	// TokenPermissions map a token scope to "read", "write" or "none".
	TokenPermissions map[string]string `json:"token_permissions,omitempty"`
	// RunnerLabelsAllowed are path.Match patterns, "!" excluding (see
	// cikit.LabelsAllowed).
	RunnerLabelsAllowed []string `json:"runner_labels_allowed,omitempty"`
}

// Bounds of a Decision.
const (
	// MaxReasonBytes bounds Decision.Reason (as cikit.MaxGateTextBytes
	// bounds a gate's reasons, which it becomes).
	MaxReasonBytes = cikit.MaxGateTextBytes
	// MaxDecisionListLen bounds SecretsScopes, TokenPermissions and
	// RunnerLabelsAllowed.
	MaxDecisionListLen = 64
	// MaxDecisionTextBytes bounds a scope, cache scope, permission or
	// label pattern.
	MaxDecisionTextBytes = 255
)

// Admission returns d as the cikit.Admission stored with the job,
// naming policyName (Engine.Name) as the policy that decided. The
// result shares nothing with d.
func (d *Decision) Admission(policyName string) *cikit.Admission {
	a := &cikit.Admission{
		Decision:            d.Decision,
		Reason:              d.Reason,
		SecretsScopes:       slices.Clone(d.SecretsScopes),
		CacheScope:          d.CacheScope,
		TokenPermissions:    maps.Clone(d.TokenPermissions),
		RunnerLabelsAllowed: slices.Clone(d.RunnerLabelsAllowed),
		Policy:              policyName,
	}
	if a.SecretsScopes == nil {
		a.SecretsScopes = []string{}
	}
	return a
}

// Validate reports whether d is a decision a job may be admitted with;
// the error names the field at fault.
func (d *Decision) Validate() error {
	switch d.Decision {
	case cikit.DecisionAllow:
	case cikit.DecisionRequireApproval, cikit.DecisionDeny:
		if strings.TrimSpace(d.Reason) == "" {
			return fmt.Errorf("reason is empty: a %s decision must say why, in a sentence a person reads", d.Decision)
		}
	default:
		return fmt.Errorf("decision is %q; it must be \"allow\", \"require_approval\" or \"deny\"", d.Decision)
	}
	if len(d.Reason) > MaxReasonBytes {
		return fmt.Errorf("reason is %d bytes, more than %d", len(d.Reason), MaxReasonBytes)
	}
	if !utf8.ValidString(d.Reason) || strings.ContainsFunc(d.Reason, isControl) {
		return fmt.Errorf("reason %q is not printable text", d.Reason)
	}
	if len(d.SecretsScopes) > MaxDecisionListLen {
		return fmt.Errorf("secrets_scopes has %d scopes, more than %d", len(d.SecretsScopes), MaxDecisionListLen)
	}
	for i, s := range d.SecretsScopes {
		if _, err := secrets.ParseScope(s); err != nil {
			return fmt.Errorf("secrets_scopes[%d]: %w", i, err)
		}
	}
	if d.CacheScope != "" && !validCacheScope(d.CacheScope) {
		return fmt.Errorf("cache_scope %q is not a cache scope: at most %d bytes of printable characters without spaces, in '/'-separated parts, none of them empty, \".\" or \"..\"", d.CacheScope, MaxDecisionTextBytes)
	}
	if len(d.TokenPermissions) > MaxDecisionListLen {
		return fmt.Errorf("token_permissions has %d scopes, more than %d", len(d.TokenPermissions), MaxDecisionListLen)
	}
	for _, scope := range sortedKeys(d.TokenPermissions) {
		if !validWord(scope) {
			return fmt.Errorf("token_permissions: %q is not a permission scope (\"contents\", \"id-token\")", scope)
		}
		switch level := d.TokenPermissions[scope]; level {
		case "read", "write", "none":
		default:
			return fmt.Errorf("token_permissions[%q] is %q; a level is \"read\", \"write\" or \"none\"", scope, level)
		}
	}
	if len(d.RunnerLabelsAllowed) > MaxDecisionListLen {
		return fmt.Errorf("runner_labels_allowed has %d patterns, more than %d", len(d.RunnerLabelsAllowed), MaxDecisionListLen)
	}
	for i, p := range d.RunnerLabelsAllowed {
		pat := strings.TrimPrefix(p, "!")
		if _, err := path.Match(pat, ""); err != nil || pat == "" || len(p) > MaxDecisionTextBytes || strings.ContainsFunc(p, isControl) {
			return fmt.Errorf("runner_labels_allowed[%d] %q is not a label pattern (path.Match syntax, a leading \"!\" excluding)", i, p)
		}
	}
	return nil
}

func isControl(r rune) bool { return unicode.IsControl(r) || r == utf8.RuneError }

func validWord(s string) bool {
	if s == "" || len(s) > MaxDecisionTextBytes {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

func validCacheScope(s string) bool {
	if len(s) > MaxDecisionTextBytes || !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return isControl(r) || unicode.IsSpace(r) }) {
		return false
	}
	for part := range strings.SplitSeq(s, "/") {
		if part == "" || part == "." || part == ".." {
			return false
		}
	}
	return true
}

// decisionOf reads a policy's answer, as OPA returns it (JSON-like
// values), strictly: every field must have its type.
func decisionOf(v any) (*Decision, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("decision is %s, not an object", typeName(v))
	}
	var d Decision
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		val := obj[k]
		var err error
		switch k {
		case "decision":
			var s string
			s, err = str(k, val)
			d.Decision = cikit.Decision(s)
		case "reason":
			d.Reason, err = str(k, val)
		case "secrets_scopes":
			d.SecretsScopes, err = strs(k, val)
		case "cache_scope":
			d.CacheScope, err = str(k, val)
		case "token_permissions":
			d.TokenPermissions, err = strMap(k, val)
		case "runner_labels_allowed":
			d.RunnerLabelsAllowed, err = strs(k, val)
		default:
			err = fmt.Errorf("decision has an unknown field %q (fields: decision, reason, secrets_scopes, cache_scope, token_permissions, runner_labels_allowed)", trunc(k))
		}
		if err != nil {
			return nil, err
		}
	}
	if _, ok := obj["decision"]; !ok {
		return nil, fmt.Errorf("decision has no field \"decision\" (\"allow\", \"require_approval\" or \"deny\")")
	}
	if d.SecretsScopes == nil {
		d.SecretsScopes = []string{}
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return &d, nil
}

func str(field string, v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%s is %s, not a string", field, typeName(v))
	}
	return s, nil
}

func strs(field string, v any) ([]string, error) {
	l, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%s is %s, not an array of strings", field, typeName(v))
	}
	if len(l) > MaxDecisionListLen {
		return nil, fmt.Errorf("%s has %d entries, more than %d", field, len(l), MaxDecisionListLen)
	}
	out := make([]string, len(l))
	for i, e := range l {
		s, ok := e.(string)
		if !ok {
			return nil, fmt.Errorf("%s[%d] is %s, not a string", field, i, typeName(e))
		}
		out[i] = s
	}
	return out, nil
}

func strMap(field string, v any) (map[string]string, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s is %s, not an object of strings", field, typeName(v))
	}
	if len(m) > MaxDecisionListLen {
		return nil, fmt.Errorf("%s has %d entries, more than %d", field, len(m), MaxDecisionListLen)
	}
	out := make(map[string]string, len(m))
	for k, e := range m {
		s, ok := e.(string)
		if !ok {
			return nil, fmt.Errorf("%s[%q] is %s, not a string", field, trunc(k), typeName(e))
		}
		out[k] = s
	}
	return out, nil
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	default:
		return "a number"
	}
}

// trunc keeps an error about a hostile key readable.
func trunc(s string) string {
	if len(s) <= 64 {
		return s
	}
	return s[:64] + "…"
}
