package journal

import (
	"fmt"
	"strconv"
	"strings"
)

// attemptDigits is the width attempts are zero-padded to in keys, so that
// byte order of keys is numeric order of attempts.
const attemptDigits = 10

// PackKey is the key of a pack in BucketPacks or BucketOutbox:
// "WORKFLOW/STEPPATH/ATTEMPT", the attempt zero-padded so that the attempts
// of one step sort in order. Workflow IDs never contain '/' (pack
// validation forbids it); step paths may.
func PackKey(workflowID, stepPath string, attempt int) string {
	return fmt.Sprintf("%s/%s/%0*d", workflowID, stepPath, attemptDigits, attempt)
}

// AttemptKey is PackKey of the step stepKey (a StepKey) at attempt.
func AttemptKey(stepKey string, attempt int) string {
	return fmt.Sprintf("%s/%0*d", stepKey, attemptDigits, attempt)
}

// StepKey is the key of a step in flight, whatever its attempt:
// "WORKFLOW/STEPPATH". Guard copies (BucketOutbox) and the guard protocol
// use it.
func StepKey(workflowID, stepPath string) string { return workflowID + "/" + stepPath }

// WorkflowPrefix is the key prefix shared by every PackKey of a workflow,
// for ForEachPrefix.
func WorkflowPrefix(workflowID string) string { return workflowID + "/" }

// ParsePackKey splits a key made by PackKey.
func ParsePackKey(key string) (workflowID, stepPath string, attempt int, err error) {
	wf, rest, ok := strings.Cut(key, "/")
	i := strings.LastIndexByte(rest, '/')
	if !ok || wf == "" || i <= 0 {
		return "", "", 0, fmt.Errorf("pack key %q: want WORKFLOW/STEPPATH/ATTEMPT", key)
	}
	attempt, err = strconv.Atoi(rest[i+1:])
	if err != nil || attempt < 0 {
		return "", "", 0, fmt.Errorf("pack key %q: bad attempt %q", key, rest[i+1:])
	}
	return wf, rest[:i], attempt, nil
}
