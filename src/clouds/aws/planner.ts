/** The EKS source planner, built from discovery's options. It brings the AWS SDK, so `awsCloud` loads it on the first plan. */
import {systemClock} from '../../core/clock.ts';
import type {SourcePlanner} from '../../discovery/cycle.ts';
import type {DiscoveryOptions} from '../../discovery/discovery.ts';
import {RateShaper, awsRateLimits} from './rate-shaper.ts';
import {AwsSources} from './sources.ts';

/** Plans the config's `aws:` matchers: the runtime's credentials and events, then the caller's `aws` overrides on top. */
export function awsPlanner(options: DiscoveryOptions): SourcePlanner {
  const ds = options.config.discovery_service;
  const {events, credentials} = options;
  const rateShaper = ds.aws_rate_limits ? new RateShaper({clock: systemClock, limits: awsRateLimits(ds.aws_rate_limits)}) : undefined;
  const aws = new AwsSources({
    perRegionConcurrency: ds.concurrency.per_region,
    requestTimeoutMs: ds.request_timeout,
    refreshMs: ds.refresh_interval,
    clock: options.clock,
    ...(rateShaper ? {rateShaper} : {}),
    ...(credentials ? {credentialProvider: (role) => credentials.aws.provider(role)} : {}),
    ...(events?.awsClient ? {onClient: (client) => events.awsClient?.(client)} : {}),
    ...(events?.tagReadFallback ? {onTagFallback: (source, fallback) => events.tagReadFallback?.(source, fallback)} : {}),
    ...options.aws,
  });
  return {plan: (context) => aws.plan(ds.aws, context)};
}
