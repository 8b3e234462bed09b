package client

import (
	"context"
	"errors"

	"github.com/bedwe/bedwe/node/api"
)

// PublishSchedule asks the peer to sign a bedwe-schedule/1 document with
// its key, adopt it and gossip it to the mesh. fileName names the document
// in error messages. A timetable the peer does not adopt (it holds one
// issued later or at the same instant) is not an error: see
// PublishResult.Adopted and InForce.
func (c *Client) PublishSchedule(ctx context.Context, fileName string, data []byte) (api.PublishResult, error) {
	resp, err := c.do(ctx, api.ClientRequest{Op: api.OpPublishSchedule, FileName: fileName, Schedule: data})
	if err != nil {
		return api.PublishResult{}, err
	}
	if resp.Published == nil {
		return api.PublishResult{}, errors.New("the peer does not know how to publish timetables (an older bedwe?)")
	}
	return *resp.Published, nil
}

// Schedule returns the timetable in force on the peer.
func (c *Client) Schedule(ctx context.Context) (api.ScheduleInfo, error) {
	resp, err := c.do(ctx, api.ClientRequest{Op: api.OpSchedule})
	if err != nil {
		return api.ScheduleInfo{}, err
	}
	if resp.Schedule == nil {
		return api.ScheduleInfo{}, errors.New("the peer does not report its timetable (an older bedwe?)")
	}
	return *resp.Schedule, nil
}
