export { RoundTripProbe, type ProbedStatement } from '../../tools/round-trip-probe';
