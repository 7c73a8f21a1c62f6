import { describe, expect, it } from '@jest/globals';
import { parse } from 'yaml';
import { bytesIssue, textIssue, yamlSafeJson } from '../../../src/domain/text.ts';

describe('textIssue', () => {
  it.each([
    ['sk-live-abc', null],
    ['héllo wörld ✓ 😀', null],
    ['tab\there', 'control_character'],
    ['nul\u0000', 'control_character'],
    ['esc\u001b[31m', 'control_character'],
    ['bell\u0007', 'control_character'],
    ['del\u007f', 'control_character'],
    ['c1\u0096', 'control_character'],
    ['nel\u0085', 'control_character'],
    ['ls\u2028', 'line_separator'],
    ['ps\u2029', 'line_separator'],
    ['nonchar\ufdd0', 'noncharacter'],
    ['nonchar\uffff', 'noncharacter'],
    ['astral nonchar\ud83f\udffe', 'noncharacter'],
    ['lone high\ud800x', 'lone_surrogate'],
    ['lone low\udc00', 'lone_surrogate'],
    ['replaced\ufffd', 'replacement_character'],
  ])('%j -> %s', (value, code) => {
    expect(textIssue(value)?.code ?? null).toBe(code);
  });

  it('allows TAB, LF and CR only in multiline text', () => {
    expect(textIssue('{\n\t"a": 1\r\n}', { multiline: true })).toBeNull();
    expect(textIssue('{\n}', {})?.code).toBe('control_character');
    expect(textIssue('{\n\u0000}', { multiline: true })?.code).toBe('control_character');
  });

  it('names the position, never the text', () => {
    const i = textIssue('secret-value\u0096tail');
    expect(i?.index).toBe(12);
    expect(i?.message).toContain('U+0096');
    expect(i?.message).not.toContain('secret');
  });
});

describe('bytesIssue', () => {
  it('accepts UTF-8 and refuses invalid sequences', () => {
    expect(bytesIssue(Buffer.from('héllo 😀', 'utf8'))).toBeNull();
    expect(bytesIssue(Buffer.from([0x61, 0xff, 0x62]))?.code).toBe('invalid_utf8');
    expect(bytesIssue(Buffer.from([0xed, 0xa0, 0x80]))?.code).toBe('invalid_utf8'); // CESU surrogate
  });
});

describe('yamlSafeJson', () => {
  it('round-trips every hostile string through a YAML 1.2 parser', () => {
    const value = {
      a: 'c1\u0096 nel\u0085 del\u007f ls\u2028 ps\u2029 ff\uffff',
      b: ['nul\u0000', 'esc\u001b', 'emoji 😀'],
    };
    const text = yamlSafeJson(value);
    expect(text).not.toMatch(/[\u007f-\u009f\u2028\u2029\uffff]/);
    expect(parse(text)).toEqual(value);
    expect(JSON.parse(text)).toEqual(value);
  });

  it('replaces unpaired surrogates, which no UTF-8 store can hold', () => {
    expect(JSON.parse(yamlSafeJson({ v: 'x\ud800y' }))).toEqual({ v: 'x\ufffdy' });
  });
});
