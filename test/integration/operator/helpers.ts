// Kept for tests written against the old location: the operator harness and polling live in test/support/.
export { sleep, until } from '../../support/until.ts';
export { cond, core, createSecret, metricValue, metricsText, resource, setSecret, startTestOperator, type CapturedOperator, type Cond, type Obj } from '../../support/operator.ts';
