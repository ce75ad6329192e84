import {systemClock} from '../../src/core/clock.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {backendContract} from './contract.ts';

backendContract('memory', async (clock) => ({backend: new MemoryBackend({clock: clock ?? systemClock})}));
