// Exact money: amounts are integers of micro-dollars (1 USD = 1,000,000 micros), which Number holds exactly up to
// about 9 billion USD. Binary floating point never takes part in a sum or a percentage.

export const MICROS_PER_USD = 1_000_000;

/** An integer amount of micro-dollars. */
export type Micros = number;

/** A USD amount as a number or a decimal string ('0.0000025', '1e-7'). */
export type UsdInput = number | string;

const DECIMAL = /^([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/;

/**
 * USD to micros, rounding half away from zero at the micro-dollar. Numbers go through their shortest decimal
 * form, so 0.0000025 becomes 3 micros, not 2 (0.0000025 * 1e6 is 2.4999999999999996 in binary).
 * Throws RangeError on NaN, infinities, non-decimal strings and results beyond Number.MAX_SAFE_INTEGER.
 * Configured amounts (catalog prices, budget limits) are converted once, where they are loaded; requests only
 * ever see micros.
 */
export function usdToMicros(usd: UsdInput): Micros {
  const text = typeof usd === 'number' ? numberText(usd) : usd.trim();
  const m = DECIMAL.exec(text);
  if (!m || (m[2] === '' && (m[3] ?? '') === '')) throw new RangeError('not a decimal USD amount');
  const negative = m[1] === '-';
  const digits = (m[2] ?? '') + (m[3] ?? '');
  // value = digits * 10^(exp - fractionLength); micros = value * 10^6
  const shift = Number(m[4] ?? '0') - (m[3] ?? '').length + 6;
  let micros: bigint;
  if (shift >= 0) {
    if (shift > 30) throw new RangeError('USD amount out of range');
    micros = BigInt(digits || '0') * 10n ** BigInt(shift);
  } else {
    const drop = -shift;
    const whole = drop >= digits.length ? '0' : digits.slice(0, digits.length - drop);
    const rest = drop >= digits.length ? digits.padStart(drop, '0') : digits.slice(digits.length - drop);
    micros = BigInt(whole) + (rest.charCodeAt(0) >= 53 /* '5' */ ? 1n : 0n);
  }
  if (micros > BigInt(Number.MAX_SAFE_INTEGER)) throw new RangeError('USD amount out of range');
  const n = Number(micros);
  return negative && n !== 0 ? -n : n;
}

function numberText(n: number): string {
  if (!Number.isFinite(n)) throw new RangeError('USD amount must be finite');
  return String(n);
}

/** Micros to a USD number for display and JSON (the micros stay the exact value). */
export function microsToUsd(micros: Micros): number {
  return micros / MICROS_PER_USD;
}

/** `micros * numerator / denominator`, rounded half up, exact for any safe-integer input. */
export function mulDivRound(micros: Micros, numerator: number, denominator: number): Micros {
  const product = micros * numerator;
  // A safe-integer product divides exactly in doubles: the remainder (fmod) is exact, product - remainder is an exact
  // multiple of the denominator, and so is their quotient. Per request this skips four BigInt allocations.
  if (
    Number.isSafeInteger(product) &&
    Number.isSafeInteger(micros) &&
    Number.isSafeInteger(numerator) &&
    Number.isSafeInteger(denominator) &&
    denominator > 0
  ) {
    const r = product % denominator;
    const q = (product - r) / denominator;
    return q + (r * 2 >= denominator ? 1 : r * 2 <= -denominator ? -1 : 0);
  }
  const n = BigInt(micros) * BigInt(numerator);
  const d = BigInt(denominator);
  const q = n / d;
  const r = n % d;
  const adjust = r * 2n >= d ? 1n : r * 2n <= -d ? -1n : 0n;
  return Number(q + adjust);
}

export function assertNonNegativeMicros(micros: Micros, what: string): void {
  if (!Number.isSafeInteger(micros) || micros < 0) throw new RangeError(`${what} must be a non-negative amount`);
}
