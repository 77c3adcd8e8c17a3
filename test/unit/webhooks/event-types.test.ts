import { expect } from 'chai';
import { WEBHOOK_EVENT_TYPES } from '../../../webhooks/event-types.js';

describe('webhook event types (webhooks/event-types)', () => {
  it('are exactly the types of service.md Events → Webhooks', () => {
    expect([...WEBHOOK_EVENT_TYPES].sort()).to.deep.equal([
      'approval.requested',
      'browser.takeover_requested',
      'connection.created',
      'connection.error',
      'connection.revoked',
      'environment.agent_keep_awake',
      'environment.agent_keep_awake_released',
      'environment.agent_request_rejected',
      'environment.agent_schedule_deleted',
      'environment.agent_schedule_set',
    ]);
  });
});
