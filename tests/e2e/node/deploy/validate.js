// Validates one Kubernetes object against its published schema: the kubernetes-models classes
// (Kubernetes, KEDA, Prometheus Operator, Gateway API; their validate() runs the OpenAPI schema
// of the API) and, for the InferencePool that no npm package models, ajv with the schema in
// schemas/inferencepool-v1.schema.json. An apiVersion/kind without a validator is an error, so
// that nothing in deploy/ goes unchecked.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { Deployment } from 'kubernetes-models/apps/v1';
import { ConfigMap, PersistentVolumeClaim, Service } from 'kubernetes-models/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { ScaledObject } from '@kubernetes-models/keda/keda.sh/v1alpha1';
import { PodMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';
import { HTTPRoute } from '@kubernetes-models/gateway-api/gateway.networking.k8s.io/v1';

const require = createRequire(import.meta.url);
const Ajv = require('ajv');

const ajv = new Ajv({ allErrors: true, strict: true, strictRequired: false });
const inferencePoolSchema = JSON.parse(readFileSync(new URL('./schemas/inferencepool-v1.schema.json', import.meta.url), 'utf8'));
const validateInferencePool = ajv.compile(inferencePoolSchema);

const MODELS = {
  'apps/v1/Deployment': Deployment,
  'v1/Service': Service,
  'v1/ConfigMap': ConfigMap,
  'v1/PersistentVolumeClaim': PersistentVolumeClaim,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'keda.sh/v1alpha1/ScaledObject': ScaledObject,
  'monitoring.coreos.com/v1/PodMonitor': PodMonitor,
  'gateway.networking.k8s.io/v1/HTTPRoute': HTTPRoute,
};

export const kindKey = (obj) => `${obj?.apiVersion}/${obj?.kind}`;

// Throws an Error naming what is wrong; returns the key ("apps/v1/Deployment") on success.
export function validateObject(obj) {
  const key = kindKey(obj);
  if (key === 'inference.networking.k8s.io/v1/InferencePool') {
    if (!validateInferencePool(obj)) throw new Error(`InferencePool: ${ajv.errorsText(validateInferencePool.errors)}`);
    return key;
  }
  const Model = MODELS[key];
  if (!Model) throw new Error(`no schema validator for ${key}`);
  new Model(obj).validate();  // throws with the failing paths
  // The model classes accept a plain object with extra top-level keys; a typo there would be
  // pruned by the API server without a word, so refuse it here.
  for (const k of Object.keys(obj)) {
    if (!['apiVersion', 'kind', 'metadata', 'spec', 'data', 'binaryData', 'immutable', 'status', 'stringData', 'type'].includes(k))
      throw new Error(`${key}: unknown top-level field ${k}`);
  }
  return key;
}
