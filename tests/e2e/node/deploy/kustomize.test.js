// `kubectl kustomize` renders the base and every overlay of deploy/kubernetes offline, and every
// object it renders validates (validate.js) — generated ones (the EPP ConfigMap) included.
// KUBECTL names the kubectl to use (run.sh checks that it embeds kustomize >= v4).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { parseAllDocuments } from 'yaml';
import { kubeFile } from './lib.js';
import { kindKey, validateObject } from './validate.js';

const KUBECTL = process.env.KUBECTL || 'kubectl';
const render = (dir) => parseAllDocuments(execFileSync(KUBECTL, ['kustomize', kubeFile(dir)], { encoding: 'utf8' })).map((d) => d.toJS());

const EXPECTED = {
  base: ['apps/v1/Deployment', 'monitoring.coreos.com/v1/PodMonitor', 'policy/v1/PodDisruptionBudget', 'v1/Service'],
  keda: ['apps/v1/Deployment', 'keda.sh/v1alpha1/ScaledObject', 'monitoring.coreos.com/v1/PodMonitor', 'policy/v1/PodDisruptionBudget', 'v1/Service'],
  hpa: ['apps/v1/Deployment', 'autoscaling/v2/HorizontalPodAutoscaler', 'monitoring.coreos.com/v1/PodMonitor', 'policy/v1/PodDisruptionBudget', 'v1/Service'],
  'inference-pool': ['gateway.networking.k8s.io/v1/HTTPRoute', 'inference.networking.k8s.io/v1/InferencePool', 'v1/ConfigMap'],
};

for (const [dir, kinds] of Object.entries(EXPECTED)) {
  test(`kubectl kustomize deploy/kubernetes/${dir} renders valid objects`, () => {
    const objs = render(dir);
    assert.deepEqual(objs.map(kindKey).sort(), kinds);
    for (const o of objs) {
      assert.equal(o.metadata.namespace, 'pagoda', `${kindKey(o)} ${o.metadata.name}: namespace`);
      validateObject(o);
    }
    if (dir === 'inference-pool') {
      const cm = objs.find((o) => o.kind === 'ConfigMap');
      assert.equal(cm.metadata.name, 'pagoda-epp-config');
      assert.match(cm.data['epp-config.yaml'], /kind: EndpointPickerConfig/);
    }
  });
}
