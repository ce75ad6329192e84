/**
 * The registry of clouds: the one place a cloud is added. Each entry is a folder's pure module
 * (`src/clouds/<cloud>/cloud-module.ts`); the core looks a cloud up here by its name.
 */
import {awsCloud} from './aws/cloud-module.ts';
import {azureCloud} from './azure/cloud-module.ts';
import {Clouds} from './cloud.ts';

/** Every cloud discovery supports, in the order metrics and warnings list them. */
export const builtInClouds = new Clouds([awsCloud, azureCloud]);
