import {systemClock} from '../../src/core/clock.ts';
import {KubernetesBackend} from '../../src/registry/kubernetes.ts';
import {startKubeEnv} from '../kubernetes/kube-env.ts';
import {backendContract} from './contract.ts';

// The backend decides expiry with its injected clock from the Lease's renewTime, so the fake clock drives it.
backendContract('kubernetes', async (clock) => {
  const env = await startKubeEnv();
  const backend = new KubernetesBackend({client: await env.client(), namespace: 'kd', clock: clock ?? systemClock});
  return {backend, cleanup: () => env.close()};
});
