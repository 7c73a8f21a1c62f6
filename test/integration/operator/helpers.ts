// Kept for tests written against the old location: the operator harness and polling live in test/support/.

export {
  type CapturedOperator,
  type Cond,
  cond,
  core,
  createSecret,
  metricsText,
  metricValue,
  type Obj,
  resource,
  setSecret,
  startTestOperator,
} from '../../support/operator.ts';
export { sleep, until } from '../../support/until.ts';
